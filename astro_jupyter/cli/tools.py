"""``astro-jupyter tool NAME ...`` (one tool through the executor, no LLM) and ``astro-jupyter tools``."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from typing import Any

from ..events import Event
from ..prompt_text import visible
from .registry import EXIT_ERROR, EXIT_OK, command, err, json_flag, open_app
from .timeline import TerminalAnswerer, TimelinePrinter


def _tool_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="tool name (see `astro-jupyter tools`)")
    p.add_argument(
        "arguments", nargs="*",
        help="key=value pairs as in %%astro (name=\"M 31\" rows=5) or one JSON object ('{\"name\": \"M 31\"}')",
    )
    json_flag(p)


def tool_arguments(tokens: list[str], schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """The CLI's tool arguments: one JSON object, or ``key=value`` tokens as the magic reads them.

    The shell has already removed the quotes, so ``name="M 31"`` arrives as ``name=M 31``; a value
    is kept as text when the tool's schema says the parameter is a string (``name=5`` stays "5"),
    else read as a JSON literal when it is one (``rows=5``, ``paper_ids=["a"]``). A token still
    holding quotes (the whole line quoted once) is read exactly as ``%astro`` reads it.
    """
    from ..cells.parsing import ArgumentSyntaxError, parse_tool_arguments

    if not tokens:
        return {}
    if len(tokens) == 1 and tokens[0].lstrip().startswith("{"):
        return parse_tool_arguments(tokens[0])
    props = (schema or {}).get("properties") or {}
    args: dict[str, Any] = {}
    for token in tokens:
        key, sep, raw = token.partition("=")
        if not sep or not key.isidentifier():
            raise ArgumentSyntaxError(f"expected key=value, not {token!r} (e.g. name=\"M 31\" rows=5, or one JSON object)")
        if raw[:1] in ("'", '"'):
            parsed = parse_tool_arguments(token)
        elif props.get(key, {}).get("type") == "string":
            parsed = {key: raw}
        else:
            try:
                parsed = {key: json.loads(raw)}
            except ValueError:
                parsed = {key: raw}
        for name, value in parsed.items():
            if name in args:
                raise ArgumentSyntaxError(f"{name} is given twice")
            args[name] = value
    return args


def _show_progress(json_output: bool) -> Any:
    def on_event(event: Event) -> None:
        if not json_output and event.type == "tool_progress":
            p = event.progress  # type: ignore[attr-defined]
            print(f"… {p.get('done', '')}/{p.get('total', '')} {visible(str(p.get('message', '')))}", file=sys.stderr,
                  flush=True)
        elif event.type == "error":
            err(visible(event.message, keep="\n"))  # type: ignore[attr-defined]

    return on_event


@command("tool", "run one tool through the executor (no LLM) and print its output", _tool_args)
async def cmd_tool(args: argparse.Namespace) -> int:
    from ..cells.parsing import ArgumentSyntaxError

    async with open_app() as app:
        tool = app.tool_registry().get(args.name)
        try:
            arguments = tool_arguments(args.arguments, tool.parameters if tool is not None else None)
        except ArgumentSyntaxError as exc:
            err(f"tool {args.name}: {exc}")
            return EXIT_ERROR
        # on a terminal the call's permission question is asked like ``ask`` does; a script is refused
        answerer = TerminalAnswerer(interactive=True, show=TimelinePrinter(sys.stderr)) \
            if not args.json and sys.stdin.isatty() else None
        cancelled = asyncio.Event()
        try:
            asyncio.get_running_loop().add_signal_handler(signal.SIGINT, cancelled.set)
        except (NotImplementedError, RuntimeError):
            pass
        result = await app.run_tool(args.name, arguments, answerer=answerer, on_event=_show_progress(args.json),
                                    cancelled=cancelled, run_id="cli")
        if args.json:
            print(json.dumps(result.to_dict(), ensure_ascii=False, default=str))
        else:
            print(result.content, file=sys.stderr if result.is_error else sys.stdout)
        return EXIT_ERROR if result.is_error else EXIT_OK


@command("tools", "list the tool definitions", json_flag)
async def cmd_tools(args: argparse.Namespace) -> int:
    async with open_app() as app:
        registry = app.tool_registry()
    if args.json:
        print(json.dumps(registry.definitions(), ensure_ascii=False, indent=1))
        return EXIT_OK
    for tool in registry.sorted_tools():
        flags = ",".join(f for f, on in (("deferred", tool.defer_loading), ("read-only", tool.is_readonly)) if on)
        print(f"{tool.name:<24} {('[' + flags + '] ') if flags else ''}{tool.classifier_summary()}")
    return EXIT_OK
