"""``astro-jupyter sessions``: the stored sessions, newest first."""

from __future__ import annotations

import argparse
import json

from .registry import EXIT_OK, command, json_flag, open_app


def _sessions_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--limit", type=int, default=50, metavar="N", help="list at most N sessions, newest first (default 50)")
    json_flag(p)


@command("sessions", "list stored sessions, newest first", _sessions_args)
async def cmd_sessions(args: argparse.Namespace) -> int:
    async with open_app() as app:
        sessions = await app.list_sessions(None, limit=args.limit, detail=False)
    if args.json:
        print(json.dumps(sessions, ensure_ascii=False))
        return EXIT_OK
    if not sessions:
        print("no sessions yet (start one with: astro-jupyter ask \"...\")")
    for s in sessions:
        print(f"{s['id']}  {s['updated_at'][:19]}  {s['source'] or '-':<8} {s['model'] or '-':<16} {s['title'] or '(untitled)'}")
    return EXIT_OK
