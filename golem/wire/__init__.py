"""Every payload golem writes to a Temporal history, in one place: one base (``Wire``),
one casing (camelCase), readable JSON in the Temporal UI and CLI.

- ``golem.wire.runs``: a run's input, its activities' inputs, its outcome;
- ``golem.wire.shipping``: how messages travel to a model call and in an outcome;
- ``golem.wire.pages``: messages served page by page through queries;
- ``golem.wire.conversations``: a conversation workflow's turns and state;
- ``golem.wire.streams``: a run's live-stream items.

and what the three durable sides (workflows, activities, client) share besides payloads:

- ``golem.wire.names``: every workflow, handler, activity, topic, search attribute and
  ``ApplicationError`` type name;
- ``golem.wire.failures``: the table from a Temporal failure to golem's exception;
- ``golem.wire.lineage``: the search attributes and summaries every run carries.

See docs/adr/0015-wire-format.md.
"""

from golem.delegation import Handoff
from golem.wire.base import Stamps, Tagged, Wire
from golem.wire.conversations import (
    ConversationInput,
    ConversationSummary,
    TurnEnded,
    TurnInput,
    TurnOutput,
)
from golem.wire.pages import (
    PAGE_BYTES,
    MessagesPage,
    MessagesQuery,
    Pager,
    Segment,
    message_bytes,
    message_size,
    read_pages,
)
from golem.wire.runs import (
    AgentRunInput,
    Carried,
    Completed,
    EvaluationInput,
    Failed,
    InHistory,
    InTranscript,
    ModelFailure,
    OutcomeMemo,
    Paged,
    Paused,
    PrepareInput,
    RunMessages,
    RunOfCall,
    RunReport,
    Sources,
    ToolCallInput,
)
from golem.wire.shipping import (
    REF_BYTES,
    ByQuery,
    Compact,
    Derived,
    HistoryBase,
    Inline,
    ModelCall,
    NewMessages,
    ShippingError,
    chain,
    chain_all,
    common_prefix,
    compact,
    content_digest,
    derived,
    expand,
)
from golem.wire.streams import StreamEvent

__all__ = [
    "PAGE_BYTES",
    "REF_BYTES",
    "AgentRunInput",
    "ByQuery",
    "Carried",
    "Compact",
    "Completed",
    "ConversationInput",
    "ConversationSummary",
    "Derived",
    "EvaluationInput",
    "Failed",
    "Handoff",
    "HistoryBase",
    "InHistory",
    "InTranscript",
    "Inline",
    "MessagesPage",
    "MessagesQuery",
    "ModelCall",
    "ModelFailure",
    "NewMessages",
    "OutcomeMemo",
    "Paged",
    "Pager",
    "Paused",
    "PrepareInput",
    "RunMessages",
    "RunOfCall",
    "RunReport",
    "Segment",
    "ShippingError",
    "Sources",
    "Stamps",
    "StreamEvent",
    "Tagged",
    "ToolCallInput",
    "TurnEnded",
    "TurnInput",
    "TurnOutput",
    "Wire",
    "chain",
    "chain_all",
    "common_prefix",
    "compact",
    "content_digest",
    "derived",
    "expand",
    "message_bytes",
    "message_size",
    "read_pages",
]
