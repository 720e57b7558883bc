"""golem serve's console at / in headless Chromium: ask, approve a waiting call and see
the answer stream in, approve one with edited arguments (and see the server refuse an
edit the tool would not take), deny one with a reason, open (reload) a conversation whose
turn waits and approve it there, and find the conversations listed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx
import pytest
from serve_support import serving
from uicheck import Page, TemporalUI, snap

sys.path.insert(0, str(Path(__file__).parents[2]))
from examples.client_tools import agent as scheduler

ASK = (
    "(async () => {{ const prompt = document.getElementById('prompt');"
    " prompt.value = {text!r}; document.getElementById('ask').requestSubmit(); return true; }})()"
)


#: Ask, then (once the waiting call shows) type into its fields: a condition awaited, no sleep.
ASK_AND_TYPE = (
    "(async () => {{ const prompt = document.getElementById('prompt');"
    " prompt.value = {text!r}; document.getElementById('ask').requestSubmit();"
    " const box = await new Promise((found) => {{ const look = () => {{"
    " const b = document.querySelector('.waiting'); b ? found(b) : requestAnimationFrame(look); }};"
    " look(); }});"
    " if ({args!r}) box.querySelector('textarea.args').value = {args!r};"
    " if ({reason!r}) box.querySelector('input.reason').value = {reason!r};"
    " return box.querySelector('textarea.args').value; }})()"
)


def asking(
    url: str, name: str, text: str, click: str, then: str, args: str = "", reason: str = ""
) -> Page:
    """The console at ``url``: ask ``text``, type ``args`` (the call's arguments) and
    ``reason`` into the waiting call's fields, click ``click``, see ``then``."""
    typing = args or reason
    return Page(
        name,
        f"{url}/",
        wait=["New conversation"],
        until="document.getElementById('agent').options.length > 0",
        evaluate=(ASK_AND_TYPE if typing else ASK).format(text=text, args=args, reason=reason),
        clicks=[(click, [then])],
    )


@pytest.mark.usefixtures("both_shapes")
async def test_the_console_asks_approves_denies_and_lists_conversations(
    temporal_ui: TemporalUI,
) -> None:
    async with (
        serving(temporal_ui.client) as server,
        httpx.AsyncClient(base_url=server.url, timeout=60) as http,
    ):
        # The namespace's earlier conversations (another test's) are listed too.
        before = len((await http.get("/conversations")).json()["conversations"])
        # A turn that waits, asked elsewhere: the page opened on it (a reload) shows the call.
        elsewhere = (await http.post("/conversations", json={"agent": "refunds"})).json()["id"]
        await http.post(f"/conversations/{elsewhere}/messages", json={"text": "Refund order 5"})
        await http.get(f"/conversations/{elsewhere}/events")
        pages = await snap(
            "serve_console",
            [
                asking(
                    server.url,
                    "approve",
                    "Refund order 42",
                    "Approve",
                    "Done: order 42 refunded 150.",
                ),
                asking(server.url, "deny", "Refund order 7", "Deny", "No refund: "),
                asking(
                    server.url,
                    "edit",
                    "Refund order 43",
                    "Approve",
                    "Done: order 43 refunded 50.",
                    args='{"order": 43, "amount": 50}',
                ),
                asking(
                    server.url,
                    "bad_edit",
                    "Refund order 44",
                    "Approve",
                    "refused (422): the edited arguments are invalid",
                    args='{"order": 44, "amount": "lots"}',
                ),
                asking(
                    server.url,
                    "not_json",
                    "Refund order 45",
                    "Approve",
                    "the arguments are not JSON",
                    args='{"order": 45, amount: 50}',
                ),
                asking(
                    server.url,
                    "reason",
                    "Refund order 46",
                    "Deny",
                    "No refund: over the limit; offer store credit.",
                    reason="over the limit; offer store credit",
                ),
                Page(
                    "reload",
                    f"{server.url}/#{elsewhere}",
                    wait=['approve refund({"order": 5, "amount": 150})?', "Refund order 5"],
                    clicks=[("Approve", ["Done: order 5 refunded 150."])],
                ),
                Page(
                    "reopened",
                    f"{server.url}/#{elsewhere}",
                    wait=["Refund order 5", "Done: order 5 refunded 150.", "tool refund"],
                ),
                Page("list", f"{server.url}/", wait=["refunds · running"]),
            ],
        )
        listed = len((await http.get("/conversations")).json()["conversations"])

    approved = pages["approve_1"]
    assert approved.missing == [] and approved.error is None, approved.text
    assert 'approve refund({"order": 42, "amount": 150})?' in approved.text
    assert "approved" in approved.text
    assert "tool refund" in approved.text  # the call, folded under the answer
    assert approved.console == []
    denied = pages["deny_1"]
    assert denied.missing == [] and denied.error is None, denied.text
    assert "denied" in denied.text
    assert pages["reload"].missing == [], pages["reload"].text  # the waiting turn's question
    reloaded = pages["reload_1"]
    assert reloaded.missing == [] and reloaded.error is None, reloaded.text
    reopened = pages["reopened"]  # the ended turn: its question, answer and call, folded
    assert reopened.missing == [] and reopened.error is None, reopened.text
    edited = pages["edit_1"]
    assert edited.missing == [] and edited.error is None, edited.text
    assert "approved with edited arguments" in edited.text
    assert "order 43 refunded 50" in edited.text  # the tool ran with the person's arguments
    bad = pages["bad_edit_1"]
    assert bad.missing == [] and bad.error is None, bad.text
    assert "amount" in bad.text.split("refused (422): ", 1)[1].splitlines()[0]
    assert "approved" not in bad.text  # nothing was sent to the run: it still waits
    assert pages["not_json_1"].missing == [] and "refused" not in pages["not_json_1"].text
    reasoned = pages["reason_1"]
    assert reasoned.missing == [] and reasoned.error is None, reasoned.text
    assert "denied: over the limit; offer store credit" in reasoned.text
    # asked before the page had loaded: the answer streams once, under the question
    assert reasoned.text.count("No refund: over the limit; offer store credit.") == 1
    assert "Refund order 46" in reasoned.text
    assert listed - before == 7  # this test's seven conversations
    assert pages["list"].text.count("refunds · running") == listed
    # told apart: ids made within a minute of each other share their first 8 characters
    entries = [line for line in pages["list"].text.splitlines() if "refunds · running" in line]
    assert len(set(entries)) == len(entries), entries


#: Ask, then (once the call shows) set its fields: ``{selector: value}`` in the waiting box.
ASK_AND_SET = (
    "(async () => {{ const prompt = document.getElementById('prompt');"
    " prompt.value = {text!r}; document.getElementById('ask').requestSubmit();"
    " const box = await new Promise((found) => {{ const look = () => {{"
    " const b = document.querySelector('.waiting'); b ? found(b) : requestAnimationFrame(look); }};"
    " look(); }});"
    " for (const [selector, value] of Object.entries({fields}))"
    " box.querySelector(selector).value = value;"
    " return box.innerText; }})()"
)


def answering(url: str, name: str, fields: dict[str, str], click: str, then: str) -> Page:
    """The console at ``url``: ask for a delivery, fill the client-run call's form with
    ``fields`` (selector: value), click ``click``, see ``then``."""
    return Page(
        name,
        f"{url}/",
        wait=["New conversation"],
        until="document.getElementById('agent').options.length > 0",
        evaluate=ASK_AND_SET.format(text="Book my delivery", fields=json.dumps(fields)),
        clicks=[(click, [then])],
    )


async def test_the_console_answers_a_client_run_tool_in_a_form_from_its_result_schema(
    temporal_ui: TemporalUI,
) -> None:
    async with serving(temporal_ui.client, (scheduler,)) as server:
        pages = await snap(
            "serve_console_tools",
            [
                answering(
                    server.url,
                    "result",
                    {"input.value": "2026-12-24"},
                    "Send result",
                    "Delivery booked for 2026-12-24.",
                ),
                answering(
                    server.url,
                    "bad_result",
                    {"input.value": "next week"},
                    "Send result",
                    "refused (422): the result for call 'date-1' does not match its schema",
                ),
                answering(
                    server.url,
                    "failed",
                    {"input.reason": "the user closed the calendar"},
                    "Fail it",
                    "No date yet (the user closed the calendar); I will ask again later.",
                ),
            ],
        )

    asked = pages["result"]
    assert 'pick_date({"why": "delivery"}) needs a result from you' in asked.value
    assert "pick_date" in asked.text and "Send result" in asked.text
    for name in ("result_1", "bad_result_1", "failed_1"):
        seen = pages[name]
        assert seen.missing == [] and seen.error is None, (name, seen.text)
        # the page's own errors only (a refusal's 4xx is the browser's own log line)
        errors = [c for c in seen.console if not c.startswith("Failed to load resource")]
        assert errors == [], (name, seen.console)
    assert "result sent" in pages["result_1"].text
    assert "result sent" not in pages["bad_result_1"].text  # refused: nothing reached the run
    assert "failed: the user closed the calendar" in pages["failed_1"].text
