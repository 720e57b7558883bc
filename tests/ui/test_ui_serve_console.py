"""golem serve's console at / in headless Chromium: ask, approve a waiting call and see
the answer stream in, deny another, open (reload) a conversation whose turn waits and
approve it there, and find the conversations listed."""

from __future__ import annotations

import httpx
from serve_support import serving
from uicheck import Page, TemporalUI, snap

ASK = (
    "(async () => {{ const prompt = document.getElementById('prompt');"
    " prompt.value = {text!r}; document.getElementById('ask').requestSubmit(); return true; }})()"
)


def asking(url: str, name: str, text: str, click: str, then: str) -> Page:
    """The console at ``url``: ask ``text``, click ``click`` on the waiting call, see ``then``."""
    return Page(
        name,
        f"{url}/",
        wait=["New conversation"],
        until="document.getElementById('agent').options.length > 0",
        evaluate=ASK.format(text=text),
        clicks=[(click, [then])],
    )


async def test_the_console_asks_approves_denies_and_lists_conversations(
    temporal_ui: TemporalUI,
) -> None:
    async with (
        serving(temporal_ui.client) as server,
        httpx.AsyncClient(base_url=server.url, timeout=60) as http,
    ):
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
                Page(
                    "reload",
                    f"{server.url}/#{elsewhere}",
                    wait=['approve refund({"order": 5, "amount": 150})?', "Refund order 5"],
                    clicks=[("Approve", ["Done: order 5 refunded 150."])],
                ),
                Page("list", f"{server.url}/", wait=["refunds · running"]),
            ],
        )

    approved = pages["approve_1"]
    assert approved.missing == [] and approved.error is None, approved.text
    assert 'approve refund({"order": 42, "amount": 150})?' in approved.text
    assert "approved" in approved.text
    assert "tool refund" in approved.text  # the call, folded under the answer
    assert approved.console == []
    denied = pages["deny_1"]
    assert denied.missing == [] and denied.error is None, denied.text
    assert "denied" in denied.text
    reloaded = pages["reload_1"]
    assert reloaded.missing == [] and reloaded.error is None, reloaded.text
    assert pages["list"].text.count("refunds · running") == 3
