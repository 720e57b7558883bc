"""``golem serve``: agents to browsers and applications (AG-UI, the Vercel AI SDK's UI
message stream, REST, and a console at ``/``).

    golem serve --agent examples.refunds:agent                    # http://127.0.0.1:8000/
    golem serve --agent app:support --host 0.0.0.0 --auth jwt \\
        --issuer https://idp.example/ --audience golem --jwks-file jwks.json

Without ``--auth`` it listens on loopback only. A worker serves the agents (``golem
worker``); this process holds no state, so any number of them serve the same conversations.
"""

from __future__ import annotations

import argparse
import os

from golem.cli.connect import DEFAULT_TASK_QUEUE, connect_args, load_agent, ui_base
from golem.codec_server import is_loopback
from golem.delegation import inline_problem

HS_KEY_VARIABLE = "GOLEM_SERVE_HS_KEY"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``golem serve``'s options."""
    parser.add_argument(
        "--agent", action="append", required=True, help="module:attribute (repeatable)"
    )
    parser.add_argument("--task-queue", default=DEFAULT_TASK_QUEUE, help="the workers' task queue")
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on")
    parser.add_argument("--port", type=int, default=8000, help="port to listen on")
    parser.add_argument(
        "--origin", action="append", default=[], help="a page origin to allow (repeatable)"
    )
    parser.add_argument(
        "--auth", choices=["none", "jwt", "header"], default="none", help="who may call"
    )
    parser.add_argument(
        "--auth-header",
        default="x-forwarded-user",
        help="--auth header: the header a trusted reverse proxy sets to the signed-in user",
    )
    parser.add_argument("--issuer", help="--auth jwt: the tokens' issuer")
    parser.add_argument("--audience", help="--auth jwt: the tokens' audience")
    parser.add_argument("--jwks-file", help="--auth jwt: the identity provider's keys (JWKS)")
    parser.add_argument("--jwks-url", help="--auth jwt: the identity provider's JWKS URL")
    parser.add_argument(
        "--hs-key-env",
        default=HS_KEY_VARIABLE,
        help="--auth jwt: the variable holding a shared HMAC key",
    )
    parser.add_argument("--max-body-bytes", type=int, help="larger requests get 413")
    parser.add_argument(
        "--inline-turns",
        action="store_true",
        help="new conversations run their turns in their own workflow, not as child runs "
        "(about half the worker CPU per turn; deploy their workers with versioning: "
        "docs/adr/0050-turns-inline.md, 0051)",
    )
    parser.add_argument(
        "--insecure",
        action="store_true",
        help="serve a non-loopback address without auth (anyone reaching it acts for everyone)",
    )


async def cmd_serve(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from golem.serve import MAX_BODY_BYTES, Auth, JWTAuth, TrustedHeaderAuth, create_app
    except ImportError as exc:
        raise SystemExit(
            f"golem serve needs: pip install 'golem-temporal[serve]' ({exc})"
        ) from None
    agents = [load_agent(spec) for spec in args.agent]
    for agent in agents if args.inline_turns else []:  # said before any connection
        if problem := inline_problem(agent):
            raise SystemExit(
                f"golem serve: --inline-turns cannot serve {problem} yet: serve it without "
                "--inline-turns (docs/adr/0050-turns-inline.md)"
            )
    auth: Auth | None = None
    if args.auth == "header":
        auth = TrustedHeaderAuth(args.auth_header)
    if args.auth == "jwt":
        if not (args.issuer and args.audience):
            raise SystemExit("--auth jwt needs --issuer and --audience")
        auth = JWTAuth(
            issuer=args.issuer,
            audience=args.audience,
            jwks_file=args.jwks_file or "",
            jwks_url=args.jwks_url or "",
            hs_key=os.environ.get(args.hs_key_env, ""),
        )
    if auth is None and not args.insecure and not is_loopback(args.host):
        raise SystemExit(
            f"refusing to serve {args.host} without auth: pass --auth jwt (with --issuer, "
            "--audience and a key), or --insecure"
        )
    client = await connect_args(args)
    ui = ui_base(client.service_client.config.target_host, getattr(args, "ui_url", None)) or ""
    try:
        app = create_app(
            client,
            agents,
            task_queue=args.task_queue,
            auth=auth,
            origins=args.origin,
            max_body_bytes=args.max_body_bytes or MAX_BODY_BYTES,
            ui_url=ui,
            inline_turns=args.inline_turns,
        )
    except ValueError as exc:
        raise SystemExit(f"golem serve: {exc}") from None
    names = ", ".join(a.name for a in agents)
    print(
        f"golem serve: http://{args.host}:{args.port}/ for {names} on task queue "
        f"{args.task_queue!r} (auth: {args.auth}{', loopback only' if auth is None else ''})",
        flush=True,
    )
    server = uvicorn.Server(
        uvicorn.Config(app, host=args.host, port=args.port, log_level="warning")
    )
    await server.serve()
    return 0
