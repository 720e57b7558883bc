"""The one internal seam a planted bug needs (issue 20, "Pin first"): reading a segment of
a conversation (messages an earlier workflow run holds) checks them against the segment's
digest. No public path shows it on its own: the worker's model activity checks the whole
base again, so only a reader (``conv.messages()``, ``fetch_run``) would silently take
what a wrong segment names. When the redesign moves this seam, move this test with it."""

from __future__ import annotations

import pytest
from temporalio.client import Client
from test_conversation import echo_agent, serve
from test_conversation_boundaries import budgeted
from test_conversation_segments import started_inputs

from golem import Message
from golem.wire import transcript as transcript_module
from golem.wire.shipping import ShippingError, chain_all
from golem.wire.transcript import HistoryReader


async def test_seam_history_reader_segment_refuses_messages_that_do_not_match_its_digest(
    temporal_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transcript_module, "CARRY_BYTES", 0)  # every switch by reference
    agent, _ = echo_agent("echo-segments")
    async with serve(temporal_client, agent) as tq:
        conv = await budgeted(temporal_client, agent, tq, turns_per_run=1)
        first = await conv.send("one")
        await conv.send("two")  # by reference to the workflow run that holds the first turn
    segment = (await started_inputs(temporal_client, conv.id))[0].earlier[0]
    reader = HistoryReader(
        lambda workflow_id, run_id: temporal_client.get_workflow_handle(
            workflow_id, run_id=run_id or None
        ).fetch_history_events(),
        temporal_client.data_converter,
    )
    assert (segment.start, segment.end) == (0, 2)
    assert await reader.segment(segment) == first.messages
    forged = segment.model_copy(update={"digest": chain_all([Message.user("forged")])[-1]})
    with pytest.raises(ShippingError, match=segment.run_id):
        await reader.segment(forged)
