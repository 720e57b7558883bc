"""The run loop, written once and driven by an :class:`Executor`.

identity → history processor → validate → (approved calls) → repair → drop system
messages → instructions → prompt → [request → tools]* → output.

The loop never touches the clock, randomness, the network or Temporal: whatever has an
effect goes through the executor. ``LocalExecutor`` (golem.local) runs it in process;
``TemporalExecutor`` (golem.workflows) runs it inside a workflow, where every effect is an
activity and every id is replay-safe. Each phase is its own unit in ``golem.phases``; this
module runs them in order and keeps the one checkpoint partial evidence slices. Tools reach
other agents through ``golem.delegation``; a handoff ends the loop, and ``run`` continues
the turn with the target agent (unless the caller does: a conversation).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from golem.approvals import needs_approval, standing_approvals
from golem.delegation import Delegations, Handoff
from golem.errors import RunError
from golem.events import RunEvent
from golem.executor import Executor
from golem.external import ExternalTool, run_tools
from golem.messages import Decision, Message, ToolCall
from golem.phases import Stop, prepare, turn
from golem.phases.batch import BatchOutcome, ToolBatch
from golem.phases.finish import Decoder, partial, result
from golem.policies import ApprovalPolicy, Rule, ruled
from golem.results import Result
from golem.run_state import AgentSpec, RunInput, RunState
from golem.tools import RunContext
from golem.toolsets import RunTools


class RunLoop:
    """One run of one agent through one executor."""

    def __init__(
        self,
        agent: AgentSpec,
        executor: Executor,
        inputs: RunInput,
        emit: Callable[[RunEvent], None] | None = None,
        follow_handoffs: bool = True,
    ) -> None:
        self.agent = agent
        self.executor = executor
        self.inputs = inputs
        self.emit = emit
        self.follow_handoffs = follow_handoffs
        """``run`` continues a handed-over turn with its target (else its caller does)."""
        self.state = RunState(agent=agent.name, budget=inputs.budget)
        self.handoff: Handoff | None = None
        """How this run's turn ended by handing over (the target's run id minted)."""
        self.delegations = Delegations(agent, executor, self.state, emit)
        self._retries: dict[str, int] = {}
        given = inputs.standing
        self.standing = dict(standing_approvals(inputs.history) if given is None else given)
        """Tools approved ``always`` in this conversation: their calls run without asking."""
        self._given = ApprovalPolicy(rules=[r.rule() for r in inputs.rules or ()])
        """The rules set on its conversation, tried before the agent's."""
        self._batch = ToolBatch(agent, executor, self._call_context, self._event, self._flight)

    async def run(self) -> Result[Any]:
        try:
            result = await self._run()
        except Stop as stop:
            raise RunError(stop.stage, stop.message, partial(self.state)) from stop.__cause__
        except asyncio.CancelledError as exc:
            raise RunError(
                "canceled", "the run was cancelled by its caller", partial(self.state)
            ) from exc
        if self.handoff is None or not self.follow_handoffs:
            return result
        return await self.delegations.hand_off(result, self.handoff, self.inputs.deps)

    async def _run(self) -> Result[Any]:
        agent, executor, state, inputs = self.agent, self.executor, self.state, self.inputs
        state.run_id, state.conversation_id = prepare.identity(inputs, executor)
        if agent.toolsets:  # this run's tools: its toolsets' servers asked once, now
            self.agent = self._batch.agent = self.delegations.agent = (
                agent
            ) = await prepare.toolsets(agent, executor, self._ctx())
        if inputs.external_tools:  # this run's own client-run tools, beside the agent's
            try:
                tools = run_tools(agent.name, agent.tools, inputs.external_tools)
            except ValueError as exc:
                raise Stop("tool", str(exc)) from None
            self.agent = self._batch.agent = self.delegations.agent = agent = RunTools(
                agent.agent if isinstance(agent, RunTools) else agent, tools
            )
        history = await prepare.process_history(agent, executor, self._ctx(), list(inputs.history))
        state.messages = history
        if inputs.approvals:
            plan = prepare.plan_approvals(agent, history, inputs.approvals, self._needs_approval)
            await self._run_batch(plan.decided, plan.decisions)
            if plan.still and self.handoff is None:
                # In process a pause forgets the evaluator's answers: it is asked again.
                given: dict[str, Decision | None] = dict(await self._evaluated(list(plan.still)))
                still = [c for c in plan.still if c.id not in given]
                if still:
                    answered = await executor.await_approvals(still, self._ctx())
                    if answered is None:
                        return self._paused(still)  # still waiting
                    given.update(answered)
                await self._run_batch(plan.still, given)
            if self.handoff is not None:
                return result(state, None)
        state.messages = prepare.repaired(state.messages)
        state.commit()
        state.instructions = await prepare.instructions(agent, executor, self._ctx())
        if inputs.prompt is not None or inputs.parts:
            state.add(prepare.prompt(inputs.prompt, inputs.parts))

        decoder = Decoder(agent.output_adapter, agent.output_retries)
        while True:
            answer = await self._model_turn()
            if answer.tool_calls:
                waiting = [c for c in answer.tool_calls if self._needs_approval(c)]
                decisions: dict[str, Decision | None] = {}
                if waiting:  # the policy's evaluator may decide them first
                    decisions.update(await self._evaluated(waiting))
                    waiting = [c for c in waiting if c.id not in decisions]
                if waiting:
                    answered = await executor.await_approvals(waiting, self._ctx())
                    if answered is None:
                        return self._paused(waiting)
                    decisions.update(answered)
                await self._run_batch(answer.tool_calls, decisions)
                if self.handoff is not None:
                    return result(state, None)  # the turn goes on with another agent
                continue
            done, value = decoder.decode(answer.content)
            if done:
                return result(state, value)
            state.add(value)  # a correction: not evidence until the next turn completes

    # -- phases --------------------------------------------------------------------

    async def _model_turn(self) -> Message:
        state = self.state
        request = turn.build_request(self.agent, state)
        turn.check_limits(self.agent, state, request)
        state.requests += 1
        number = state.turn + 1
        listened = self.emit is not None  # no event is built for nobody
        if listened:
            self._event("model_start", turn=number)
        on_delta = turn.TurnDeltas(self._event, number) if listened else None
        response = await turn.request(
            self.executor, request, self._ctx(turn=number), on_delta, state.requests
        )
        state.turn = number
        state.usage = state.usage + response.usage
        message = state.add(response.message)
        state.commit()
        if listened:
            self._event("model_end", turn=number, message=message, response=response)
        return message

    async def _run_batch(
        self,
        calls: list[ToolCall] | tuple[ToolCall, ...],
        decisions: Mapping[str, Decision | None] | None = None,
    ) -> None:
        """Run a batch, record every result it gives, commit; stop if it says so.
        ``decisions``: a person's (``None``: none arrived in time); a call of a tool
        approved ``always`` records the decision that did it."""
        decisions = dict(decisions or {})
        for call in calls:
            if call.id in decisions or isinstance(self.agent.tools.get(call.name), ExternalTool):
                continue
            standing, rule = self.standing.get(call.name), self._rule(call)
            if rule is not None and rule.decide == "deny":  # a rule's denial wins
                decisions[call.id] = ruled(rule, "")
            elif standing is not None and self._asks(call):
                decisions[call.id] = standing.model_copy(update={"args": None})
            elif rule is not None and rule.decide == "allow":
                decisions[call.id] = ruled(rule, "")
        for call in calls:
            given = decisions.get(call.id)
            if given is not None and given.approved and given.always:
                self.standing.setdefault(call.name, given)
        outcome = await self._batch.run(
            calls,
            retries=self._retries,
            tool_calls=self.state.tree_tool_calls,
            decisions=decisions,
            budget=self.state.budget,
        )
        self._record(outcome)
        if outcome.stop is not None:
            if isinstance(outcome.cause, asyncio.CancelledError):
                raise outcome.cause
            raise outcome.stop from outcome.cause
        if outcome.handoff is not None and self.handoff is None:
            agent, reason = outcome.handoff
            self.handoff = Handoff(agent=agent, run_id=self.executor.new_id(), reason=reason)

    def _record(self, outcome: BatchOutcome) -> None:
        state = self.state
        self._retries = dict(outcome.retries)
        state.tool_calls += outcome.executed
        for answer in outcome.results:
            message = state.add(answer.message)
            state.tool_results += 1
            if not answer.closed and self.emit is not None:
                self._event("tool_end", call=answer.call, message=message)
        state.commit()

    def _paused(self, waiting: list[ToolCall]) -> Result[Any]:
        return result(self.state, None, pending=waiting, external=self.external_ids(waiting))

    def external_ids(self, calls: list[ToolCall]) -> set[str]:
        """The ids of ``calls`` that wait for the application (client-run tools)."""
        return {c.id for c in calls if isinstance(self.agent.tools.get(c.name), ExternalTool)}

    def _needs_approval(self, call: ToolCall) -> bool:
        """Whether ``call`` waits: a client-run tool's always (for the application); for a
        person not when its tool is approved ``always`` or a policy rule allows or denies
        it; when a rule says ask; else as its tool says."""
        if isinstance(self.agent.tools.get(call.name), ExternalTool):
            return True
        rule = self._rule(call)
        if call.name in self.standing and (rule is None or rule.decide != "deny"):
            return False
        return rule.decide == "ask" if rule is not None else self._asks(call)

    def _rule(self, call: ToolCall) -> Rule | None:
        """The first rule matching ``call``: those set on its conversation, then the agent's."""
        policies = [p for p in (self._given, self.agent.approval_policy) if p and p.rules]
        if not policies:
            return None  # no rule to match: no context to build for each call
        tool = self.agent.tools.get(call.name)
        ctx = self._call_context(call, self._retries, None)
        return next((m for p in policies if (m := p.match(tool, call, ctx)) is not None), None)

    async def _evaluated(self, calls: list[ToolCall]) -> Mapping[str, Decision | None]:
        """What the policy's evaluator decided of ``calls`` (the rest go to a person; durably
        a person may answer first: ``Executor.evaluate_approvals``)."""
        policy = self.agent.approval_policy
        if policy is None or policy.evaluator is None:
            return {}
        external = self.external_ids(calls)  # the application answers those, not a person
        users = [m.content for m in self.state.messages if m.role == "user"]
        asked = users[-1] if users else ""
        evaluated = [
            (call, self._call_context(call, self._retries, None))
            for call in calls
            if call.id not in external
        ]
        if not evaluated:
            return {}
        return await self.executor.evaluate_approvals(calls, evaluated, asked)

    def _asks(self, call: ToolCall) -> bool:
        tool = self.agent.tools.get(call.name)
        if tool is None or not callable(tool.requires_approval):
            return bool(tool and tool.requires_approval)  # no predicate: no context to build
        return needs_approval(tool, call, self._call_context(call, self._retries, None))

    # -- context and events --------------------------------------------------------

    def _ctx(
        self, *, turn: int | None = None, retries: Mapping[str, int] | None = None, **call: Any
    ) -> RunContext[Any]:
        state = self.state
        return RunContext(
            deps=self.inputs.deps,
            run_id=state.run_id,
            conversation_id=state.conversation_id,
            agent_name=self.agent.name,
            usage=state.usage,
            retries=dict(self._retries if retries is None else retries),
            turn=state.turn if turn is None else turn,
            **call,
        )

    def _call_context(self, call: ToolCall, retries: Any, args: Any) -> RunContext[Any]:
        return self._ctx(
            retries=retries,
            tool_call_id=call.id,
            tool_name=call.name,
            tool_args=args,
            delegator=self.delegations,
        )

    def _flight(self, names: list[str]) -> None:
        self.state.tools_in_flight = names

    def _event(self, kind: str, **fields: Any) -> None:
        if self.emit is None:
            return
        fields.setdefault("turn", self.state.turn)
        self.emit(
            RunEvent(
                kind=kind,  # type: ignore[arg-type]
                run_id=self.state.run_id,
                conversation_id=self.state.conversation_id,
                agent=self.agent.name,
                **fields,
            )
        )
