"""``astro-jupyter ask``: a run of the agent, its timeline streamed to the terminal (or JSON lines)."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from ..events import to_json
from .registry import EXIT_CANCELLED, EXIT_ERROR, EXIT_OK, EXIT_TRUNCATED, EXIT_UNAVAILABLE, command, err, json_flag
from .registry import make_config, open_app
from .timeline import TerminalAnswerer, TimelinePrinter


def _ask_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("prompt", help="what to ask the agent ('-' reads it from stdin)")
    p.add_argument("--session", help="continue this session (id from `astro-jupyter sessions`)")
    p.add_argument("--model", help="chat model for this run (default: LLM_MODEL)")
    p.add_argument("--max-steps", type=int, help="maximum LLM turns")
    p.add_argument("--coordinator", action="store_true", help="coordinator mode (delegates to workers)")
    json_flag(p)


@command("ask", "ask the agent; streams the timeline (JSON lines with --json)", _ask_args)
async def cmd_ask(args: argparse.Namespace) -> int:
    from ..app import follow
    from ..errors import AstroError
    from ..llm.client import NOT_CONFIGURED

    config = make_config()
    if not config.llm_configured:
        err(NOT_CONFIGURED)
        return EXIT_UNAVAILABLE
    prompt = sys.stdin.read() if args.prompt == "-" else args.prompt
    async with open_app(config) as app:
        try:
            # no --coordinator: the session's own mode (a coordinator session stays one)
            handle = await app.start_run_handle(
                None, prompt, session_id=args.session, model=args.model, max_steps=args.max_steps,
                coordinator=True if args.coordinator else None,
            )
        except AstroError as exc:
            err(str(exc))
            return EXIT_UNAVAILABLE if exc.reason == "llm_unavailable" else EXIT_ERROR
        loop = asyncio.get_running_loop()
        try:
            loop.add_signal_handler(signal.SIGINT, handle.cancel)
        except (NotImplementedError, RuntimeError):
            pass
        printer = TimelinePrinter()
        answerer = TerminalAnswerer(interactive=not args.json and sys.stdin.isatty())
        error_reason = ""
        cut_off = ""  # the final answer stopped at the output bound (a cut tool call was retried by the model)
        async for event in follow(handle, answerer):
            if args.json:
                sys.stdout.write(to_json(event) + "\n")
                sys.stdout.flush()
            else:
                printer.show(event)
            if event.type == "error" and event.reason != "notice":  # type: ignore[attr-defined]
                error_reason = event.reason  # type: ignore[attr-defined]
            if event.type == "truncated" and not event.subagent_id:
                cut_off = "" if event.tool_name else event.message  # type: ignore[attr-defined]
            elif event.type == "text_delta" and not event.subagent_id:
                cut_off = ""  # a later turn wrote on
        done = await handle.wait()
        if done.reason == "max_steps":
            steps = args.max_steps or config.max_steps
            err(f"stopped after {steps} steps (the step limit) before the agent finished; continue with "
                f"`astro-jupyter ask \"continue\" --session {done.session_id} --max-steps {steps * 2}`, "
                "or raise the default with c.AstroConfig.max_steps (env ASTRO_MAX_STEPS)")
        if done.reason == "cancelled":
            return EXIT_CANCELLED
        if done.reason == "error":
            return EXIT_UNAVAILABLE if error_reason == "llm_unavailable" else EXIT_ERROR
        if cut_off:  # the answer looks finished but is not: say so, and let a script see it
            err(f"the answer is incomplete: {cut_off}")
            return EXIT_TRUNCATED
        return EXIT_OK
