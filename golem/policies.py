"""Approval policies: which calls run, which are refused and which go to a person.

    from golem import ApprovalPolicy, Ask, Rule
    policy = ApprovalPolicy(
        rules=[
            Rule(tool="lookup_*", decide="allow"),
            Rule(tool="refund", when=lambda ctx, args: args["amount"] > 1000, decide="deny",
                 reason="refunds over 1000 go through finance"),
            Rule(tool="refund", decide="ask"),
        ],
        evaluator=reviewer,          # async (ctx, call) -> Approve | Deny | Ask, or an Agent
    )
    agent = Agent(model, approval_policy=policy)

Rules are tried in order and the first that matches decides; a call no rule matches falls
back to its tool's ``requires_approval``. What would go to a person is offered to the
evaluator first, once per call; it never fails open: an evaluator that raises, times out or
answers anything but ``Approve``/``Deny`` sends the call to a person (docs/adr/0030).

The evaluator may be another golem ``Agent`` whose ``output_type`` is :class:`Verdict`: it
is run (``agent.run``) with the call's tool, arguments and the run's last user message as
its prompt, and the run's deps. Durably it runs in process inside the evaluator's activity,
not as a child run: the activity is retried and its answer recorded, so nothing is lost,
but the reviewer's own run is not a workflow of its own (no transcript in the UI).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from fnmatch import fnmatchcase
from typing import Any, Literal, Protocol, cast

from pydantic import BaseModel, ConfigDict

from golem.approvals import Approve, Deny, to_decision
from golem.messages import Decision, ToolCall
from golem.tools import ApprovalPredicate, RunContext, Tool


class Ask(BaseModel):
    """An evaluator's answer: a person decides this call."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reason: str = ""


#: ``ApprovalPolicy(evaluator=...)``: called once per call that would wait for a person.
Evaluator = Callable[[RunContext[Any], ToolCall], Awaitable[Approve | Deny | Ask]]

#: What a rule does with a call it matches.
Choice = Literal["allow", "deny", "ask"]


class Verdict(BaseModel):
    """What an evaluator ``Agent`` answers (its ``output_type``): ``allow`` runs the call,
    ``deny`` refuses it (the model reads ``reason``), ``ask`` leaves it to a person."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    decide: Choice
    reason: str = ""

    def answer(self) -> Approve | Deny | Ask:
        if self.decide == "allow":
            return Approve()
        if self.decide == "deny":
            return Deny(reason=self.reason)
        return Ask(reason=self.reason)


@dataclass(frozen=True)
class Rule:
    """``tool`` (a name or a glob such as ``"refund*"``) and, when given, ``when`` (a
    predicate on the validated arguments, as ``requires_approval`` takes) match a call;
    ``decide`` says what happens to it; ``reason`` is what the model reads of a denial."""

    tool: str
    when: ApprovalPredicate | None = None
    decide: Choice = "ask"
    reason: str = ""

    def __post_init__(self) -> None:
        if self.decide not in ("allow", "deny", "ask"):
            raise ValueError(
                f"rule for tool {self.tool!r}: decide is {self.decide!r}; give 'allow', "
                "'deny' or 'ask'"
            )


@dataclass(frozen=True)
class ApprovalPolicy:
    """Ordered ``rules`` (first match wins) and an optional ``evaluator`` deciding before a
    person does, within ``evaluator_timeout``: an async function, or an ``Agent`` whose
    ``output_type`` is :class:`Verdict` (durably run inside the evaluator's activity, not
    as a child run)."""

    rules: Sequence[Rule] = ()
    evaluator: Evaluator | Reviewer | None = None
    evaluator_timeout: timedelta = timedelta(seconds=60)

    def __post_init__(self) -> None:
        agent = _as_agent(self.evaluator)
        if agent is not None and not (
            isinstance(agent.output_type, type) and issubclass(agent.output_type, Verdict)
        ):
            raise ValueError(
                f"the evaluator agent {agent.name!r} answers {agent.output_type!r}: give it "
                "output_type=golem.Verdict (decide allow, deny or ask, and a reason)"
            )

    def match(self, tool: Tool | None, call: ToolCall, ctx: RunContext[Any]) -> Rule | None:
        """The first rule that matches ``call`` (``None``: none does). A ``when`` that
        raises sends the call to a person: never fails open."""
        for rule in self.rules:
            if not fnmatchcase(call.name, rule.tool):
                continue
            if rule.when is None:
                return rule
            try:
                args = tool.validate_args(call.args).model_dump() if tool else {}
                if rule.when(ctx, args):
                    return rule
            except Exception:
                return Rule(tool=rule.tool, decide="ask")
        return None


class StoredRule(BaseModel):
    """A rule as a conversation keeps it (``conv.set_approval_policy``): no predicate."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool: str
    decide: Choice = "ask"
    reason: str = ""

    def rule(self) -> Rule:
        return Rule(tool=self.tool, decide=self.decide, reason=self.reason)


def stored_rules(policy: ApprovalPolicy) -> list[StoredRule]:
    """``policy``'s rules as a conversation keeps them; ``ValueError`` for what cannot be
    kept in a workflow's history (a ``when`` predicate, an evaluator)."""
    if policy.evaluator is not None:
        raise ValueError(
            "a policy set on a running conversation cannot carry an evaluator (code, not "
            "data): give the agent its evaluator, ApprovalPolicy(evaluator=...)"
        )
    kept = []
    for rule in policy.rules:
        if rule.when is not None:
            raise ValueError(
                f"the rule for tool {rule.tool!r} has a when= predicate: a policy set on a "
                "running conversation keeps rules by tool name or glob only"
            )
        kept.append(StoredRule(tool=rule.tool, decide=rule.decide, reason=rule.reason))
    return kept


def ruled(rule: Rule, at: str) -> Decision:
    """What an ``allow`` or ``deny`` rule records on the call's result."""
    by = f"policy:{rule.tool}"
    if rule.decide == "allow":
        return Decision(approved=True, by=by, at=at)
    return Decision(approved=False, reason=rule.reason, by=by, at=at)


class Reviewer(Protocol):
    """An evaluator agent as the policy sees it (a golem ``Agent``): read by shape, since the
    agent imports the loop, which imports this module."""

    @property
    def name(self) -> str: ...
    @property
    def output_type(self) -> Any: ...
    def run(self, prompt: str | None = None, *, deps: Any = None) -> Awaitable[Any]: ...


def _as_agent(evaluator: object) -> Reviewer | None:
    shaped = all(hasattr(evaluator, a) for a in ("name", "output_type", "run"))
    return cast(Reviewer, evaluator) if shaped else None


def review_prompt(call: ToolCall, asked: str) -> str:
    """What an evaluator agent reads: the call and the user's last message."""
    try:
        args = json.dumps(json.loads(call.args), ensure_ascii=False)
    except ValueError:
        args = json.dumps(call.args)  # not JSON: shown as the string the model wrote
    return (
        "Decide whether this tool call may run: allow it, deny it (your reason is what the "
        "model reads) or ask a person.\n"
        f"Tool: {call.name}\n"
        f"Arguments: {args}\n"
        f"The user's last message: {asked or '(none)'}"
    )


async def _review(agent: Reviewer, ctx: RunContext[Any], call: ToolCall, asked: str) -> Any:
    result = await agent.run(review_prompt(call, asked), deps=ctx.deps)
    if result.paused:
        return None  # a reviewer that waits for someone is no answer: a person decides
    output = result.output
    return output.answer() if isinstance(output, Verdict) else output


#: The calls an evaluator is asked about, each with its context.
Evaluated = list[tuple[ToolCall, RunContext[Any]]]


async def in_turn(
    evaluated: Evaluated,
    ask: Callable[[ToolCall, RunContext[Any]], Awaitable[Decision | None]],
) -> dict[str, Decision | None]:
    """What ``ask`` (an evaluation) decides of each call of ``evaluated``, one call after
    another; a call it leaves to a person is not in the answer."""
    decided: dict[str, Decision | None] = {}
    for call, ctx in evaluated:
        if (decision := await ask(call, ctx)) is not None:
            decided[call.id] = decision
    return decided


async def evaluate(
    policy: ApprovalPolicy | None, ctx: RunContext[Any], call: ToolCall, asked: str = ""
) -> Decision | None:
    """Ask ``policy``'s evaluator about ``call`` within its timeout: its decision, or
    ``None`` (a person decides) when it asks, raises, times out or answers anything else.
    ``asked``: the run's last user message, which an evaluator agent reads."""
    if policy is None or policy.evaluator is None:
        return None
    fn = policy.evaluator
    agent = _as_agent(fn)
    try:
        asking = _review(agent, ctx, call, asked) if agent else cast(Evaluator, fn)(ctx, call)
        answer = await asyncio.wait_for(asking, policy.evaluator_timeout.total_seconds())
    except Exception:
        return None  # never fails open
    at = datetime.now(UTC).isoformat(timespec="seconds")
    name = agent.name if agent is not None else getattr(fn, "__name__", type(fn).__name__)
    return evaluated(answer, call, name, at)


def evaluated(answer: object, call: ToolCall, name: str, at: str) -> Decision | None:
    """An evaluator's answer as the decision recorded (``by="evaluator:<name>"``), or
    ``None`` (a person decides) for ``Ask`` and for anything that is not an answer."""
    if not isinstance(answer, Approve | Deny):
        return None
    try:
        return to_decision(call.id, answer, by=f"evaluator:{name}", at=at)
    except ValueError:
        return None  # an over-long reason: a person decides
