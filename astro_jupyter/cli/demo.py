"""``astro-jupyter demo``: seed the offline demo library (sample papers, Sesame cache, a session)."""

from __future__ import annotations

import argparse
import json

from .registry import EXIT_OK, command, open_app


def _demo_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print what was seeded as JSON")


@command("demo", "seed the offline demo library: sample papers, a Sesame cache, a recorded session", _demo_args)
async def cmd_demo(args: argparse.Namespace) -> int:
    async with open_app() as app:
        summary = await app.seed_demo()
    if args.json:
        print(json.dumps(summary.__dict__))
    else:
        print(f"library: {app.config.home}")
        for paper_id in summary.paper_ids:
            print(f"  paper   {paper_id}")
        for target in summary.targets:
            print(f"  target  {target} (cached)")
        print(f"  session {summary.session_id}")
    return EXIT_OK
