"""``astro-jupyter``: the agent and its tools from a terminal (headless use, scripts, CI).

Each subcommand is one ``@command`` function: a name, a help line, a function adding its
arguments, and an async handler returning the exit code. Another module adds its own
subcommands by listing itself in ``COMMAND_MODULES`` (it is imported before parsing and
uses the same decorator), so features never need to rewrite this file.

Exit codes: 0 ok, 1 a tool or run error, 2 no LLM endpoint configured/reachable or bad
usage, 130 cancelled by Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import pydoc
import shutil
import signal
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Callable, TextIO

from .events import Event, to_json
from .prompt_text import permission_lines, visible
from .timeline_text import LinePrinter

if TYPE_CHECKING:
    from .config import AstroConfig
    from .services.container import ServiceContainer

EXIT_OK, EXIT_ERROR, EXIT_UNAVAILABLE, EXIT_CANCELLED = 0, 1, 2, 130

Handler = Callable[[argparse.Namespace], Awaitable[int]]
Configure = Callable[[argparse.ArgumentParser], None]


@dataclass
class Command:
    name: str
    help: str
    configure: Configure
    handler: Handler


COMMANDS: dict[str, Command] = {}

# Modules that register more subcommands with ``@command`` when imported.
COMMAND_MODULES: tuple[str, ...] = ("astro_jupyter.cli_doctor", "astro_jupyter.cli_library", "astro_jupyter.cli_demo",
                                     "astro_jupyter.cli_export")


def command(name: str, help: str, configure: Configure | None = None) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        COMMANDS[name] = Command(name, help, configure or (lambda p: None), handler)
        return handler

    return register


def _json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable JSON output")


# -- shared plumbing ---------------------------------------------------------------------------
def make_config() -> "AstroConfig":
    from .config import AstroConfig

    return AstroConfig()


async def open_services(config: "AstroConfig | None" = None) -> "ServiceContainer":
    from .services.container import ServiceContainer

    services = ServiceContainer(config or make_config())
    await services.start()
    return services


def err(message: str) -> None:
    print(f"astro-jupyter: {message}", file=sys.stderr, flush=True)


class TimelinePrinter(LinePrinter):
    """Human-readable rendering of a run's events for a terminal.

    Model and tool text never reaches the terminal raw (``prompt_text.visible``), and a
    permission request is printed in full, wrapped at the terminal width; one taller than
    the terminal goes through the pager first, so no part of it scrolls away unseen.
    """

    def __init__(self, out: TextIO = sys.stdout, width: int | None = None) -> None:
        super().__init__(out, width if width is not None else shutil.get_terminal_size().columns)

    def show(self, event: Event) -> None:
        if event.type == "permission_request" and self.out.isatty():
            lines = permission_lines(event, self.width)
            if len(lines) > shutil.get_terminal_size().lines - 2:
                pydoc.pager("\n".join(lines))
                self._line(f"? permission for {visible(event.name)}: {len(lines)} lines shown in the pager above")  # type: ignore[attr-defined]
                return
        if self._show_common(event):
            return
        kind = event.type
        if kind == "text_delta":
            self._stream(event.delta)  # type: ignore[attr-defined]
        elif kind == "thinking_delta":
            shown = visible(event.delta, keep="\n\t")  # type: ignore[attr-defined]
            self.out.write(f"\x1b[2m{shown}\x1b[0m" if self.out.isatty() else "")
        elif kind == "ask_user":
            self._line(f"? {visible(event.question, keep=chr(10))} (answer from the sidebar or a notebook; the CLI cannot answer)")  # type: ignore[attr-defined]
        elif kind == "error":
            if self.mid_line:
                self._line("")
            label = "note" if event.reason == "notice" else "error"  # type: ignore[attr-defined]
            err(f"{label}: {visible(event.message, keep=chr(10))}")  # type: ignore[attr-defined]
        elif kind == "done":
            if self.mid_line:
                self._line("")
            print(f"[{event.reason} · session {event.session_id}]", file=sys.stderr, flush=True)  # type: ignore[attr-defined]


# -- ask ----------------------------------------------------------------------------------------
def _ask_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("prompt", help="what to ask the agent ('-' reads it from stdin)")
    p.add_argument("--session", help="continue this session (id from `astro-jupyter sessions`)")
    p.add_argument("--model", help="chat model for this run (default: LLM_MODEL)")
    p.add_argument("--max-steps", type=int, help="maximum LLM turns")
    p.add_argument("--coordinator", action="store_true", help="coordinator mode (delegates to workers)")
    _json_flag(p)


@command("ask", "ask the agent; streams the timeline (JSON lines with --json)", _ask_args)
async def cmd_ask(args: argparse.Namespace) -> int:
    from .agent.runtime import AgentRuntime
    from .errors import AstroError
    from .llm.client import NOT_CONFIGURED

    config = make_config()
    if not config.llm_configured:
        err(NOT_CONFIGURED)
        return EXIT_UNAVAILABLE
    prompt = sys.stdin.read() if args.prompt == "-" else args.prompt
    if not prompt.strip():
        err("the prompt is empty")
        return EXIT_UNAVAILABLE
    services = await open_services(config)
    runtime = AgentRuntime(services)
    try:
        try:
            handle = await runtime.start_run(
                prompt, session_id=args.session, model=args.model, max_steps=args.max_steps,
                coordinator=args.coordinator, source="cli",
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
        error_reason = ""
        async for _, event in handle.events():
            if args.json:
                sys.stdout.write(to_json(event) + "\n")
                sys.stdout.flush()
            else:
                printer.show(event)
            if event.type == "error" and event.reason != "notice":  # type: ignore[attr-defined]
                error_reason = event.reason  # type: ignore[attr-defined]
            elif event.type in ("ask_user", "permission_request") and not event.subagent_id:
                answer = await _answer_question(event, interactive=not args.json and sys.stdin.isatty())
                handle.answer(event.request_id, answer)  # type: ignore[attr-defined]
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
        return EXIT_OK
    finally:
        await runtime.close()
        await services.close()


async def _answer_question(event: Event, *, interactive: bool) -> str:
    """Questions are asked on the terminal when there is one; a script gets an immediate refusal."""
    if not interactive:
        if event.type == "permission_request":
            err(f"denied {visible(event.name)}: a non-interactive CLI cannot grant permission")  # type: ignore[attr-defined]
            return "deny"
        return "(no answer: the question was asked in a non-interactive CLI)"
    if event.type == "permission_request":
        prompt = f"allow {visible(event.name)}? [y/N/always] "  # type: ignore[attr-defined]
    else:
        options = [visible(str(o)) for o in event.options]  # type: ignore[attr-defined]
        prompt = f"answer{(' (' + ' / '.join(options) + ')') if options else ''}: "
    loop = asyncio.get_running_loop()
    try:
        reply = (await loop.run_in_executor(None, input, prompt)).strip()
    except EOFError:
        reply = ""
    if event.type == "permission_request":
        return {"y": "allow", "yes": "allow", "a": "always", "always": "always"}.get(reply.lower(), "deny")
    return reply


# -- tool ---------------------------------------------------------------------------------------
def _tool_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="tool name (see `astro-jupyter tools`)")
    p.add_argument(
        "arguments", nargs="*",
        help="key=value pairs as in %%astro (name=\"M 31\" rows=5) or one JSON object ('{\"name\": \"M 31\"}')",
    )
    _json_flag(p)


def tool_arguments(tokens: list[str], schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """The CLI's tool arguments: one JSON object, or ``key=value`` tokens as the magic reads them.

    The shell has already removed the quotes, so ``name="M 31"`` arrives as ``name=M 31``; a value
    is kept as text when the tool's schema says the parameter is a string (``name=5`` stays "5"),
    else read as a JSON literal when it is one (``rows=5``, ``paper_ids=["a"]``). A token still
    holding quotes (the whole line quoted once) is read exactly as ``%astro`` reads it.
    """
    from .cells.parsing import ArgumentSyntaxError, parse_tool_arguments

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


@command("tool", "run one tool through the executor (no LLM) and print its output", _tool_args)
async def cmd_tool(args: argparse.Namespace) -> int:
    from .agent.executor import ToolCallRequest, ToolExecutor
    from .agent.tools import build_default_registry
    from .agent.tools.base import ToolContext
    from .agent.tools.file_state import FileStateCache

    from .cells.parsing import ArgumentSyntaxError

    config = make_config()
    registry = build_default_registry(config)
    tool = registry.get(args.name)
    try:
        arguments = tool_arguments(args.arguments, tool.parameters if tool is not None else None)
    except ArgumentSyntaxError as exc:
        err(f"tool {args.name}: {exc}")
        return EXIT_ERROR
    services = await open_services(config)
    try:
        executor = ToolExecutor(registry, config=config)

        async def emit(event: Event) -> None:
            if not args.json and event.type == "tool_progress":
                p = event.progress  # type: ignore[attr-defined]
                print(f"… {p.get('done', '')}/{p.get('total', '')} {visible(str(p.get('message', '')))}", file=sys.stderr,
                      flush=True)
            elif event.type == "error":
                err(visible(event.message, keep="\n"))  # type: ignore[attr-defined]

        async def ask_permission(request: Event) -> str:
            """On a terminal the call's permission question is asked like ``ask`` does; a script is refused."""
            TimelinePrinter(sys.stderr).show(request)
            return await _answer_question(request, interactive=True)

        ctx = ToolContext(
            config=config, services=services, session_id="", cancelled=asyncio.Event(), emit=emit,
            file_state=FileStateCache(), run_id="cli",
            ask_permission=ask_permission if not args.json and sys.stdin.isatty() else None,
        )
        loop = asyncio.get_running_loop()
        try:
            loop.add_signal_handler(signal.SIGINT, ctx.cancelled.set)
        except (NotImplementedError, RuntimeError):
            pass
        [result] = await executor.execute([ToolCallRequest("cli_call", args.name, json.dumps(arguments))], ctx)
        await services.release_run("cli")  # e.g. the kernel notebook_run started
        if args.json:
            print(json.dumps(result.output.to_dict(), ensure_ascii=False, default=str))
        else:
            stream = sys.stderr if result.output.is_error else sys.stdout
            print(result.output.content, file=stream)
        return EXIT_ERROR if result.output.is_error else EXIT_OK
    finally:
        await services.close()


# -- tools, sessions ---------------------------------------------------------------------------
@command("tools", "list the tool definitions", _json_flag)
async def cmd_tools(args: argparse.Namespace) -> int:
    from .agent.tools import build_default_registry

    registry = build_default_registry(make_config())
    if args.json:
        print(json.dumps(registry.definitions(), ensure_ascii=False, indent=1))
        return EXIT_OK
    for tool in registry.sorted_tools():
        flags = ",".join(f for f, on in (("deferred", tool.defer_loading), ("read-only", tool.is_readonly)) if on)
        print(f"{tool.name:<24} {('[' + flags + '] ') if flags else ''}{tool.classifier_summary()}")
    return EXIT_OK


def _sessions_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--limit", type=int, default=50, metavar="N", help="list at most N sessions, newest first (default 50)")
    _json_flag(p)


@command("sessions", "list stored sessions, newest first", _sessions_args)
async def cmd_sessions(args: argparse.Namespace) -> int:
    services = await open_services()
    try:
        sessions = await services.sessions.list(limit=args.limit)
    finally:
        await services.close()
    if args.json:
        print(json.dumps([s.to_dict() for s in sessions], ensure_ascii=False))
        return EXIT_OK
    if not sessions:
        print("no sessions yet (start one with: astro-jupyter ask \"...\")")
    for s in sessions:
        print(f"{s.id}  {s.updated_at[:19]}  {s.source or '-':<8} {s.model or '-':<16} {s.title or '(untitled)'}")
    return EXIT_OK


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not raise again."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


# -- entry point --------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    for module in COMMAND_MODULES:
        importlib.import_module(module)
    from ._version import __version__

    parser = argparse.ArgumentParser(prog="astro-jupyter", description="A research agent for astronomers (headless use).")
    parser.add_argument("--version", action="version", version=f"astro-jupyter {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for cmd in COMMANDS.values():
        cmd.configure(sub.add_parser(cmd.name, help=cmd.help, description=cmd.help))
    return parser


def main(argv: list[str] | None = None) -> int:
    for stream in (sys.stdout, sys.stderr):  # text a terminal cannot encode is shown escaped, never a traceback
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return EXIT_UNAVAILABLE
    from .errors import AstroError

    try:
        return asyncio.run(COMMANDS[args.command].handler(args))
    except KeyboardInterrupt:
        return EXIT_CANCELLED
    except BrokenPipeError:
        # the reader went away (`astro-jupyter tools --json | head`): stop quietly, as cat does
        _silence_stdout()
        return EXIT_OK
    except AstroError as exc:
        err(str(exc))
        return EXIT_ERROR


if __name__ == "__main__":  # pragma: no cover - `python -m astro_jupyter.cli`
    from astro_jupyter.cli import main as _main  # the registry lives in the imported module, not __main__

    sys.exit(_main())
