"""Toolsets: tools an agent gets from a server (an MCP server), read once per run.

    agent = Agent(model, toolsets=[files, docs.filtered(["search"]).prefixed("docs")])

A toolset's tools join the agent's own, named and described by their server. Which tools
a server offers is only known by asking it, so a run asks once, before its first model
request (durably: one recorded activity per toolset), and keeps the answer for the whole
run; a conversation asks again on each turn (each turn is a run). Names must not clash:
``prefix="docs"`` makes ``search`` the model's ``docs_search``. A clash the agent can see
at construction (a toolset filtered to names its own tools use) is an error there; one a
run finds in a server's list fails that run at stage ``tool``, naming both.

``requires_approval`` and ``at_most_once`` take ``True`` (every tool), a set of the
server's tool names, or a predicate on them; they mean what they mean for a local tool.
``requires_approval`` also takes a predicate ``(ctx, args) -> bool`` asked of each call.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol, Self, TypedDict

from pydantic import BaseModel, RootModel

from golem.models.base import ToolDefinition
from golem.retry import TOOL_RETRY, Retry
from golem.tools import ApprovalPredicate, RunContext, Tool, ToolOutcome

#: Which of a server's tools a rule applies to: all (``True``), none, some names, or a test.
ToolRule = bool | Collection[str] | Callable[[str], bool]
#: How a run calls one of a toolset's tools in process: (server's tool name, arguments).
CallFn = Callable[[str, dict[str, Any]], Awaitable[ToolOutcome]]


class ToolsetError(Exception):
    """A toolset's server could not be reached, lost a call, or answered it with an error:
    the tool's failure, tried again per its retry policy (``retry``)."""


class ToolsetRefusal(ToolsetError):
    """An error answer a retry cannot fix: never tried again."""


class ToolsetOptions(TypedDict, total=False):
    """The options every toolset takes (see ``Toolset``)."""

    prefix: str | None
    requires_approval: ToolRule | ApprovalPredicate
    at_most_once: ToolRule
    timeout: timedelta | None
    retry: Retry | None
    max_retries: int


class ToolsetConnection(Protocol):
    """A run's link to a toolset's server, in process (``Toolset.connect``)."""

    async def list_tools(self) -> list[ToolDefinition]:
        """Every tool the server offers (all pages), as it describes them."""
        ...

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        """Call the server's tool ``name``."""
        ...

    async def aclose(self) -> None:
        """Let go of the server (a stdio server process ends)."""
        ...


@dataclass(frozen=True, kw_only=True)
class Toolset:
    """Tools offered by a server. ``golem.mcp.MCPServer`` is the toolset golem ships."""

    name: str
    """The server's name: unique among an agent's toolsets, shown in the UI's activities."""
    prefix: str | None = None
    """``prefix="docs"``: the server's ``search`` is the model's ``docs_search``."""
    only: frozenset[str] | None = None
    """Offer only these of the server's tools (``filtered``); ``None``: all of them."""
    requires_approval: ToolRule | ApprovalPredicate = False
    """Which calls wait for a person's decision, as ``@agent.tool(requires_approval=True)``:
    also a predicate ``(ctx, args) -> bool`` on each call's arguments."""
    at_most_once: ToolRule = False
    """Which calls are never repeated after a crash (durably: one attempt; a call whose
    worker died is closed as outcome-unknown). The others are retried: at least once."""
    timeout: timedelta | None = None
    """Longest one call may take (durably: its activity's start-to-close timeout, five
    minutes unless set)."""
    retry: Retry | None = None
    """How a call that failed (its server not reached or lost, or an error answer a retry may
    fix) is tried again, in process and durably; ``None``: three attempts. At-most-once tools
    get one."""
    max_retries: int = 2
    """Failed results the model may correct (invalid arguments) before the run ends."""

    def __post_init__(self) -> None:
        for what in ("only", "requires_approval", "at_most_once"):
            rule = getattr(self, what)
            if isinstance(rule, str):  # a string is a collection of letters: never meant
                said = "filtered" if what == "only" else what
                raise TypeError(
                    f"toolset {self.name!r}: {said} takes a set of tool names, not the "
                    f"string {rule!r} (write {{{rule!r}}})"
                )
            if rule is not None and _is_names(rule):
                object.__setattr__(self, what, frozenset(rule))

    def filtered(self, names: Iterable[str]) -> Self:
        """This toolset offering only ``names`` (the server's names, before any prefix)."""
        return dataclasses.replace(self, only=names)  # type: ignore[arg-type]

    def prefixed(self, prefix: str | None) -> Self:
        """This toolset with its tools named ``<prefix>_<name>``."""
        return dataclasses.replace(self, prefix=prefix)

    def tool_name(self, remote: str) -> str:
        """What the model calls the server's tool ``remote``."""
        return f"{self.prefix}_{remote}" if self.prefix else remote

    def connect(self, ctx: RunContext[Any]) -> ToolsetConnection:
        """Open this run's link to the server (in process)."""
        raise NotImplementedError(f"{type(self).__name__} cannot run in process")

    @property
    def shareable(self) -> bool:
        """Whether runs may share one link to the server (it depends on no run's context):
        ``async with agent:`` keeps one for all its runs."""
        return False

    def tools(
        self, listed: Sequence[ToolDefinition], call: CallFn | None = None
    ) -> list[ToolsetTool]:
        """The golem tools for what the server listed: filtered, prefixed and ruled. ``call``
        runs one in process (durably the executor runs them, and ``call`` is ``None``).
        Raises ``ValueError`` when a rule or the filter names a tool the server lacks."""
        offered = {d.name for d in listed}
        for what, names in (("filtered", self.only), *self._named_rules()):
            missing = sorted(set(names or ()) - offered)
            if missing:
                raise ValueError(
                    f"toolset {self.name!r}: {what} names {missing}, which its server does "
                    f"not offer (it offers {sorted(offered) or 'no tools'})"
                )
        return [self._tool(d, call) for d in listed if self.only is None or d.name in self.only]

    def _named_rules(self) -> list[tuple[str, Collection[str]]]:
        rules = [("requires_approval", self.requires_approval), ("at_most_once", self.at_most_once)]
        return [(what, rule) for what, rule in rules if _is_names(rule)]  # type: ignore[misc]

    def _tool(self, listed: ToolDefinition, call: CallFn | None) -> ToolsetTool:
        remote = listed.name

        async def run(arguments: dict[str, Any]) -> ToolOutcome:
            if call is None:
                raise RuntimeError(f"toolset {self.name!r} runs its tools as activities")
            return await call(remote, arguments)

        return ToolsetTool(
            function=run,
            name=self.tool_name(remote),
            description=listed.description,
            takes_context=False,
            args_model=Arguments,
            requires_approval=_approval_rule(self.requires_approval, remote),
            at_most_once=self.once(remote),
            max_retries=self.max_retries,
            timeout=self.timeout,
            retry=self.retry,
            toolset=self,
            remote_name=remote,
            parameters=listed.parameters,
        )

    @property
    def retry_policy(self) -> Retry:
        """How listing the tools is tried again (and calls, at-most-once aside)."""
        policy = self.retry or TOOL_RETRY
        return dataclasses.replace(policy, non_retryable=(*policy.non_retryable, ToolsetRefusal))

    def once(self, remote: str) -> bool:
        """Whether the server's tool ``remote`` is at-most-once."""
        return _applies(self.at_most_once, remote)

    def may_need_approval(self) -> bool:
        """Whether any of this toolset's tools could wait for a person."""
        rule = self.requires_approval
        return bool(rule) if isinstance(rule, bool) or _is_names(rule) else True


class Arguments(RootModel[dict[str, Any]]):
    """A toolset tool's arguments: any JSON object (its server checks them)."""


@dataclass(kw_only=True)
class ToolsetTool(Tool):
    """One of a toolset's tools, as one run knows it."""

    toolset: Toolset
    remote_name: str
    """The tool's name on its server."""
    parameters: dict[str, Any] = field(default_factory=dict)
    """The server's JSON schema of its arguments, sent to the model unchanged."""

    @property
    def definition(self) -> ToolDefinition:
        return ToolDefinition(
            name=self.name, description=self.description, parameters=self.parameters
        )

    @property
    def retry_policy(self) -> Retry:
        policy = super().retry_policy
        return dataclasses.replace(policy, non_retryable=(*policy.non_retryable, ToolsetRefusal))

    def arguments(self, args: str | BaseModel) -> dict[str, Any]:
        """The call's arguments as the JSON object its server receives."""
        parsed = args if isinstance(args, BaseModel) else self.validate_args(args)
        return dict(parsed.root) if isinstance(parsed, Arguments) else parsed.model_dump()

    async def execute(self, ctx: RunContext[Any], args: str | BaseModel) -> ToolOutcome:
        try:
            arguments = self.arguments(args)
        except ValueError as exc:
            return ToolOutcome(status="failed", content=str(exc))
        outcome: ToolOutcome = await self.function(arguments)
        return outcome


def _is_names(rule: ToolRule | ApprovalPredicate) -> bool:
    return not isinstance(rule, bool) and not callable(rule)


def _approval_rule(rule: ToolRule | ApprovalPredicate, remote: str) -> bool | ApprovalPredicate:
    """A tool's ``requires_approval``: a call predicate (two parameters) as it is, asked of
    each call; any other rule decided now for the server's tool ``remote``."""
    if callable(rule) and len(inspect.signature(rule).parameters) == 2:
        return rule  # type: ignore[return-value]
    return _applies(rule, remote)  # type: ignore[arg-type]


def _applies(rule: ToolRule, remote: str) -> bool:
    if isinstance(rule, bool):
        return rule
    if callable(rule):
        return bool(rule(remote))
    return remote in rule


def _own_clash(agent: str, name: str, toolset: Toolset, remote: str) -> str:
    return (
        f"agent {agent!r}: tool {name!r} of toolset {toolset.name!r} (its server's "
        f"{remote!r}) clashes with the agent's own tool {name!r}; give the toolset a prefix="
    )


def _toolsets_clash(name: str, first: ToolsetTool | tuple[Toolset, str], second: Toolset) -> str:
    owner = first.toolset.name if isinstance(first, ToolsetTool) else first[0].name
    return (
        f"tool {name!r} of toolset {second.name!r} clashes with tool {name!r} of toolset "
        f"{owner!r}; give one of them a prefix="
    )


def check_toolsets(agent: str, own: Collection[str], toolsets: Sequence[Toolset]) -> None:
    """What ``Agent(...)`` can check before any server is asked: unique toolset names, and
    no clash among the names a filtered toolset will offer. Raises ``ValueError``."""
    names = [t.name for t in toolsets]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"agent {agent!r}: two toolsets are named {twice}")
    known: dict[str, tuple[Toolset, str]] = {}
    for toolset in toolsets:
        for remote in sorted(toolset.only or ()):
            name = toolset.tool_name(remote)
            if name in own:
                raise ValueError(_own_clash(agent, name, toolset, remote))
            if name in known:
                raise ValueError(f"agent {agent!r}: {_toolsets_clash(name, known[name], toolset)}")
            known[name] = (toolset, remote)


def with_tools(agent: Any, tools: Sequence[ToolsetTool]) -> RunTools:
    """``agent`` as one run sees it: its own tools and ``tools`` (its toolsets' for this run).
    Raises ``ValueError`` naming both tools of a clash."""
    merged: dict[str, Tool] = dict(agent.tools)
    for tool in tools:
        if tool.name in agent.tools:
            raise ValueError(_own_clash(agent.name, tool.name, tool.toolset, tool.remote_name))
        earlier = merged.get(tool.name)
        if earlier is not None:
            assert isinstance(earlier, ToolsetTool)
            raise ValueError(
                f"agent {agent.name!r}: {_toolsets_clash(tool.name, earlier, tool.toolset)}"
            )
        merged[tool.name] = tool
    return RunTools(agent, merged)


class RunTools:
    """An agent with the tools of one run: everything else is the agent's own."""

    def __init__(self, agent: Any, tools: Mapping[str, Tool]) -> None:
        self.agent = agent
        self.tools = dict(tools)
        self.tool_definitions = [tool.definition for tool in self.tools.values()]
        self.toolsets: tuple[Toolset, ...] = ()  # read already: this run has their tools

    def __getattr__(self, name: str) -> Any:
        return getattr(self.agent, name)


def tools_digest(definitions: Sequence[ToolDefinition]) -> str:
    """The key a run's toolset tools travel by (durably, to its model activity)."""
    data = b"".join(d.model_dump_json().encode() + b"\n" for d in definitions)
    return hashlib.blake2b(data, digest_size=16).hexdigest()


class OpenToolsets:
    """The links an agent keeps open while ``async with agent:`` lasts: one per shareable
    toolset, opened by the first run that lists it and used by every later run (a server
    that died is reached anew by the next call); closed when the block ends."""

    def __init__(self) -> None:
        self._links: dict[str, ToolsetConnection] = {}

    def connect(self, toolset: Toolset, ctx: RunContext[Any]) -> ToolsetConnection | None:
        """The shared link to ``toolset``'s server (``None``: the run opens its own)."""
        if not toolset.shareable:
            return None
        link = self._links.get(toolset.name)
        if link is None:
            link = self._links[toolset.name] = toolset.connect(ctx)
        return link

    async def aclose(self) -> None:
        links, self._links = self._links, {}
        for link in reversed(links.values()):
            await link.aclose()
