"""Research-log export: a stored session as a Jupyter notebook (nbformat v4).

The log reads complete without running: a title cell, a ``%load_ext astro_jupyter``
cell, then per run (turn) the prompt, each tool call as a ``%astro TOOL {json}`` code
cell carrying its recorded output, subagent work under its own heading, and the answer.
Re-running the notebook repeats the tool calls. Calls that only make sense inside an
agent run (asking the user, loading tools, compaction, spawning subagents/workers) are
recorded as Markdown instead of code, so a re-run never blocks on a question. Only calls that
ran become code: a call that was refused (permission, a hook), invalid or cancelled before it
started is text that says it did not run. A kernel session's log says at the top that its
variables came from the user's own cells (which it lacks), and shows what ``kernel_inspect``
showed the agent as Markdown.

The record is model output, so it is untrusted: only calls of tools in the registry become
code, their arguments are JSON data written on one visible line (every character a line
splitter or a bidi renderer could act on is a ``\\uXXXX`` escape) and checked to read back
exactly; any other name, argument or text is shown escaped in a Markdown cell.

Data comes from the store only: sessions, messages, runs and their stored events. A log
written to disk (``write_research_log``) also gets a ``.bib`` beside it with every paper the
answers cite; in the log the citations are written with those keys (``[@key]``) and a last
cell lists the references.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import nbformat

    from .services.bibtex import BibResult
    from .services.container import ServiceContainer

def _escape_invisible(text: str) -> str:
    """``\\uXXXX`` for every character that is not printable (line and paragraph separators,
    NEL, bidi controls, zero-width and lone surrogates); JSON reads these escapes back as-is."""
    out: list[str] = []
    for ch in text:
        if ch.isprintable() or ch == " ":
            out.append(ch)
            continue
        code = ord(ch)
        if code > 0xFFFF:  # JSON spells astral characters as a surrogate pair
            code -= 0x10000
            out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
        else:
            out.append(f"\\u{code:04x}")
    return "".join(out)


def tool_cell_source(name: str, arguments: dict[str, Any]) -> str:
    """``%astro NAME {json}`` on one line of visible characters (raises TypeError/ValueError
    for arguments JSON cannot carry)."""
    return f"%astro {name} {_escape_invisible(json.dumps(arguments, ensure_ascii=False, allow_nan=False))}"


def safe_tool_cell(name: Any, arguments: Any, registered: frozenset[str],
                   agent_steps: frozenset[str]) -> str | None:
    """The code-cell source for a recorded call, or None when it must not be code: a name that is
    not a registered (re-runnable) tool, an agent step (its effect belongs to a live run),
    arguments that are not a JSON object, or a line that would not read back as exactly this call."""
    from .cells.parsing import parse_tool_arguments

    if not isinstance(name, str) or name not in registered or name in agent_steps:
        return None
    if not isinstance(arguments, dict):
        return None
    try:
        source = tool_cell_source(name, arguments)
    except (TypeError, ValueError):
        return None
    if len(source.splitlines()) != 1 or not source.isprintable():
        return None
    command, _, rest = source.partition(" ")[2].partition(" ")
    try:
        same = command == name and parse_tool_arguments(rest) == arguments
    except ValueError:
        same = False
    return source if same else None


def _visible(text: Any) -> str:
    """Raw text with control, bidi and other invisible characters shown as escapes (newlines and
    tabs kept), for Markdown code blocks."""
    text = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False, default=str)
    return "\n".join(_escape_invisible(line.replace("\t", "    ")) for line in text.split("\n"))


def _fenced(text: Any, info: str = "text") -> str:
    """A fenced code block that no content can close early (the fence outgrows every backtick run)."""
    body = _visible(text)
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{body}\n{fence}"


def _one_line(text: Any) -> str:
    """Text for a heading or list item: one line, Markdown specials and HTML escaped."""
    flat = " ".join(_visible(text).split())
    return re.sub(r"([\\`*_\[\]<>!|~&])", r"\\\1", flat)


def _code_span(text: Any) -> str:
    """Inline code no content can close early (backticks longer than any run inside)."""
    body = " ".join(_visible(text).split())
    ticks = "`" * (max((len(run) for run in re.findall(r"`+", body)), default=0) + 1)
    return f"{ticks} {body} {ticks}"


def _clean_surrogates(value: Any) -> Any:
    """Lone surrogates (from a bad model stream) as U+FFFD, so the notebook can be written as UTF-8."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_clean_surrogates(v) for v in value]
    if isinstance(value, dict):
        for key in list(value):
            value[key] = _clean_surrogates(value[key])
        return value
    return value


_SURROGATE = re.compile("[\ud800-\udfff]")


def tool_outputs(name: str, arguments: Any, result: dict[str, Any] | None, count: int) -> list[Any]:
    """The cell outputs a live ``%astro`` call shows: the result object's text and HTML."""
    import nbformat.v4 as nbf

    from .cells.display import AstroResult

    if result is None:
        return [nbf.new_output("stream", name="stderr", text="(no result was recorded: the run was interrupted)\n")]
    shown = AstroResult(name, arguments if isinstance(arguments, dict) else None, str(result.get("output", "")),
                        bool(result.get("is_error")), dict(result.get("metadata") or {}),
                        int(result.get("duration_ms") or 0))
    data = {"text/plain": repr(shown), "text/html": shown._repr_html_()}
    return [nbf.new_output("execute_result", data=data, execution_count=count)]


CATALOG_TOOLS = frozenset({"query_catalog", "cone_search"})
_TAP_URL = re.compile(r"^https?://[A-Za-z0-9._~:/?#\[\]@!$&()*+,;=%-]+$")


def catalog_cell_source(result: dict[str, Any] | None) -> str | None:
    """A successful catalog query as plain pyvo code (the log re-runs it without astro-jupyter), or None.

    Every value from the record is a Python literal (``repr``: quotes, newlines and invisible
    characters escaped) on its own line; a URL that is not a plain http(s) URL is not exported."""
    meta = dict((result or {}).get("metadata") or {})
    cat = meta.get("catalog")
    if (result or {}).get("is_error") or not isinstance(cat, dict):
        return None
    url, adql, maxrec, mode = cat.get("service_url"), cat.get("adql"), cat.get("maxrec"), cat.get("mode")
    if not (isinstance(url, str) and _TAP_URL.match(url) and isinstance(adql, str) and adql.strip()
            and isinstance(maxrec, int) and not isinstance(maxrec, bool) and mode in ("sync", "async")):
        return None
    lines = [
        "# Re-runs the catalog query with pyvo alone (astro-jupyter stored the result as a VOTable)",
        "import pyvo",
        f"service = pyvo.dal.TAPService({url!r})",
        f"adql = {adql!r}",
        f"result = service.run_{mode}(adql, maxrec={maxrec})",
        "table = result.to_table()",
        "table",
    ]
    source = "\n".join(lines)
    return source if all(line.isprintable() for line in lines) else None


def _fence(text: str) -> str:
    """A code fence longer than any backtick run in ``text`` (the text cannot close it early)."""
    run, best = 0, 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        best = max(best, run)
    return "`" * max(3, best + 1)


def kernel_run_cell(arguments: Any, result: dict[str, Any] | None, count: int) -> Any:
    """``kernel_run`` code as the real code cell it was, with the outputs it had; None if it never ran.

    Only code that ran (the user allowed it and the kernel executed it) becomes code;
    a denied or failed-to-start call must not turn into a runnable cell of the log."""
    import nbformat.v4 as nbf

    meta = dict((result or {}).get("metadata") or {})
    code = arguments.get("code") if isinstance(arguments, dict) else None
    if not isinstance(code, str) or meta.get("executed") is not True or meta.get("code") != code:
        return None
    cell = nbf.new_code_cell(code, execution_count=count)
    outputs = []
    for name in ("stdout", "stderr"):
        if meta.get(name):
            outputs.append(nbf.new_output("stream", name=name, text=str(meta[name])))
    error = meta.get("error")
    if isinstance(error, dict):
        frames = [str(f) for f in error.get("frames") or []]
        outputs.append(nbf.new_output("error", ename=str(error.get("ename", "Error")), evalue=str(error.get("evalue", "")),
                                      traceback=[*frames, f"{error.get('ename')}: {error.get('evalue')}"]))
    elif meta.get("result") is not None:
        outputs.append(nbf.new_output("execute_result", data={"text/plain": str(meta["result"])}, execution_count=count))
    cell.outputs = outputs
    return cell


def _quote(text: str) -> str:
    return "\n".join("> " + line if line else ">" for line in (text or "").splitlines()) or ">"


@dataclass
class Turn:
    """One question and everything that answered it: a run, or stored messages without a run."""

    prompt: str
    run: Any = None  # RunRecord, when the turn was a recorded run
    messages: list[Any] = field(default_factory=list)

    @property
    def answer(self) -> str:
        """The last assistant text (what the user read as the answer)."""
        texts = [m.content for m in self.messages if m.role == "assistant" and (m.content or "").strip()]
        return texts[-1] if texts else ""


def build_turns(messages: list[Any], runs: list[Any]) -> list[Turn]:
    """Group messages by run (a run's extra user messages — summaries, background results — stay
    inside it); messages stored without a run start a turn at each user message; runs that left
    no messages still get their turn."""
    by_run = {r.id: r for r in runs}
    turns: list[Turn] = []
    run_turns: dict[str, Turn] = {}
    loose: Turn | None = None
    for m in messages:
        if m.run_id:
            turn = run_turns.get(m.run_id)
            if turn is None:
                run = by_run.get(m.run_id)
                prompt = run.prompt if run is not None and run.prompt else (m.content if m.role == "user" else "")
                turn = run_turns[m.run_id] = Turn(prompt, run)
                turns.append(turn)
            turn.messages.append(m)
        elif m.role == "user" or loose is None:
            loose = Turn(m.content if m.role == "user" else "")
            turns.append(loose)
            if m.role != "user":
                loose.messages.append(m)
        else:
            loose.messages.append(m)
    for run in runs:
        if run.id not in run_turns:
            turns.append(Turn(run.prompt, run))
    return turns


def _calls_from_messages(messages: list[Any]) -> list[dict[str, Any]]:
    """Fallback when a run's events were not stored: tool calls + results from the messages."""
    results = {m.tool_call_id: m for m in messages if m.role == "tool"}
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role != "assistant" or not m.tool_calls:
            continue
        for tc in m.tool_calls:
            fn = tc.get("function", {})
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except ValueError:
                args = fn.get("arguments")
            res = results.get(tc.get("id"))
            out.append({"type": "tool_call", "id": tc.get("id"), "name": fn.get("name"), "arguments": args,
                        "result": None if res is None else {"output": res.content, "is_error": bool(res.metadata.get("is_error")),
                                                            "metadata": res.metadata, "duration_ms": 0}})
    return out


def _timeline(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool calls (with their results attached) and subagent boundaries, in event order."""
    results = {e.get("tool_call_id"): e for e in events if e.get("type") == "tool_result"}
    items: list[dict[str, Any]] = []
    for e in events:
        if e.get("type") == "tool_call":
            items.append({**e, "result": results.get(e.get("id"))})
        elif e.get("type") in ("subagent", "ask_user", "error", "model_switch", "truncated"):
            items.append(e)
    return items


def registered_tool_names(services: "ServiceContainer") -> frozenset[str]:
    """Every tool a ``%astro TOOL`` cell can run (the standard registry, coordinator tools included)."""
    from .agent.tools import build_default_registry

    return frozenset(build_default_registry(services.config, coordinator=True).names())


def agent_step_names(services: "ServiceContainer") -> frozenset[str]:
    """Tools flagged ``agent_step``: their effect belongs to a live run, so they export as Markdown."""
    from .agent.tools import build_default_registry

    registry = build_default_registry(services.config, coordinator=True)
    return frozenset(t.name for t in registry.sorted_tools() if t.agent_step)


# What the executor says when a call is refused before it runs, for records stored without the
# result's ``ran`` flag (older events; messages without events).
_REFUSED_PREFIXES = ("Permission denied for ", "Blocked by a PreToolUse hook", "Error: a PreToolUse hook rewrote")
_REFUSED_ERRORS = re.compile(  # validation (``Error: NAME: ...``), loops, unknown tools, cancelled or aborted first
    r"Error: (\S+: |\S+ was cancelled by the user before it started|\S+ was not started because|"
    r"you have called \S+ with identical arguments|unknown tool |\S+ is not available here)")
_NOT_RUN_STAGES = frozenset({"validate", "permission", "hook", "cancelled", "aborted"})


def not_run_reason(result: dict[str, Any] | None) -> str | None:
    """Why a recorded call never ran (refused, blocked, invalid, cancelled first), or None if it ran.

    A code cell of the log re-runs its call, so only calls that ran may become one: a refused
    ``run_bash`` must not turn into a runnable ``%astro run_bash`` cell."""
    if result is None:
        return "no result was recorded (the run ended before this call finished or was allowed)"
    meta = result.get("metadata") if isinstance(result.get("metadata"), dict) else {}
    output = str(result.get("output", ""))
    if meta.get("ran") is True:
        return None
    if meta.get("ran") is False or meta.get("stage") in _NOT_RUN_STAGES:
        return output or "it was not run"
    if output.startswith(_REFUSED_PREFIXES) or _REFUSED_ERRORS.match(output):
        return output
    return None


def _inspect_cell(args: Any, result: dict[str, Any] | None) -> str:
    """What ``kernel_inspect`` showed the agent: the user's variables, as Markdown (it re-runs nothing)."""
    name = args.get("name") if isinstance(args, dict) else None
    what = f"the variable {_code_span(str(name)[:200])}" if name else "the kernel's variables"
    output = (result or {}).get("output", "(no result recorded)")
    failed = " (it was not shown)" if (result or {}).get("is_error") else ""
    return f"*The agent looked at {what} in the kernel*{failed}\n\n" + _fenced(output)


KERNEL_NOTE = ("*This session ran in a notebook kernel: the variables the agent inspected and used came from the "
               "user's own cells, which this log does not contain. Run those cells first (or define the same "
               "variables) before re-running the code cells below.*")


def _unexported_call_cell(name: Any, args: Any, result: dict[str, Any] | None, not_run: str | None = None) -> str:
    """A call that must not become code, shown as recorded: name, arguments and output escaped.
    ``not_run``: why it never ran (refused, invalid, cancelled first), said first."""
    if not_run is not None:
        head = (f"*Not run:* the agent asked for {_code_span(str(name)[:200])}, and the call was refused or never "
                "started, so this log holds it as text, not as a cell to run.")
        output = not_run
    else:
        head = (f"*Tool call recorded as text, not code* ({_code_span(str(name)[:200])} is not a tool this "
                "notebook can run, or its arguments are not a JSON object).")
        output = (result or {}).get("output", "(no result recorded)")
    return (head + "\n\n**Name**\n\n" + _fenced(name) +
            "\n\n**Arguments**\n\n" + _fenced(args if isinstance(args, str) else _json_text(args)) +
            ("\n\n**Why it did not run**\n\n" if not_run is not None else "\n\n**Output**\n\n") + _fenced(output))


def _json_text(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except ValueError:  # circular structures cannot come from JSON, but never fail the export
        return repr(value)


async def export_session(services: "ServiceContainer", session_id: str, *,
                         registered: frozenset[str] | None = None, bib: "BibResult | None" = None) -> "nbformat.NotebookNode":
    """Build the research-log notebook of ``session_id`` (raises SessionNotFound). ``registered``:
    the tool names that may become code cells (default: the standard registry's); ``bib``: the
    session's bibliography, whose keys the answers' citations are written with."""
    import nbformat
    import nbformat.v4 as nbf

    from ._version import __version__
    from .services.bibtex import use_keys

    if registered is None:
        registered = registered_tool_names(services)
    agent_steps = agent_step_names(services)

    session = await services.sessions.get(session_id)
    messages = await services.messages.list(session_id)
    runs = await services.runs.list_for_session(session_id)
    turns = build_turns(messages, runs)
    model = session.model or next((r.model for r in runs if r.model), "")

    nb = nbf.new_notebook()
    title = session.title or "Untitled session"
    nb.cells.append(nbf.new_markdown_cell(
        f"# {_one_line(title)}\n\n"
        f"- **Session:** `{session.id}`\n- **Model:** {_code_span(model) if model else 'default'}\n"
        f"- **Started:** {session.created_at}\n- **Last activity:** {session.updated_at}\n"
        f"- **Turns:** {len(turns)}\n\n"
        f"*Research log exported by astro-jupyter {__version__}. Tool cells carry their recorded outputs; "
        "re-running them repeats the calls.*"
    ))
    nb.cells.append(nbf.new_code_cell("%load_ext astro_jupyter"))
    count = 1
    in_kernel = False  # a kernel_inspect / kernel_run call: the log needs the note about the user's cells
    run_meta: list[dict[str, Any]] = []
    tool_total = 0
    for number, turn in enumerate(turns, start=1):
        run = turn.run
        events = [data for _, data in await services.runs.events_after(run.id, 0)] if run is not None else []
        items = _timeline(events) if events else _calls_from_messages(turn.messages)
        nb.cells.append(nbf.new_markdown_cell(f"## Turn {number}\n\n**Prompt**\n\n{_quote(turn.prompt)}"))
        sub_heads: dict[str, str] = {}
        calls = 0
        for item in items:
            kind = item.get("type")
            if kind == "subagent":
                if item.get("phase") == "start":
                    sub_heads[item.get("id", "")] = item.get("task", "")
                    nb.cells.append(nbf.new_markdown_cell(
                        f"### Subagent {_code_span(item.get('id'))}\n\n**Task**\n\n{_fenced(item.get('task', ''))}"))
                else:
                    nb.cells.append(nbf.new_markdown_cell(
                        f"**Subagent {_code_span(item.get('id'))} summary**\n\n{item.get('summary') or '*(none)*'}"))
            elif kind == "ask_user":
                nb.cells.append(nbf.new_markdown_cell(f"**The agent asked:**\n\n{_fenced(item.get('question', ''))}"))
            elif kind == "truncated":  # the log must not pass a cut-off answer or call off as complete
                nb.cells.append(nbf.new_markdown_cell(f"**Cut off:** {_one_line(item.get('message', ''))}"))
            elif kind == "error" and item.get("reason") == "notice":
                nb.cells.append(nbf.new_markdown_cell(f"**Note**\n\n{_fenced(item.get('message', ''))}"))
            elif kind == "error":
                nb.cells.append(nbf.new_markdown_cell(
                    f"**Error** ({_one_line(item.get('reason', ''))})\n\n{_fenced(item.get('message', ''))}"))
            elif kind == "tool_call":
                calls += 1
                name, args, result = item.get("name") or "", item.get("arguments"), item.get("result")
                if name in ("kernel_run", "kernel_inspect"):
                    in_kernel = True
                if name == "kernel_inspect":
                    nb.cells.append(nbf.new_markdown_cell(_inspect_cell(args, result)))
                    continue
                if name == "kernel_run":
                    code_cell = kernel_run_cell(args, result, count)
                    if code_cell is None:
                        code = str((args or {}).get("code", "")) if isinstance(args, dict) else ""
                        why = (result or {}).get("output", "(no result recorded)")
                        fence = _fence(code)
                        nb.cells.append(nbf.new_markdown_cell(
                            f"*kernel_run did not run*: {why}\n\n{fence}text\n{code}\n{fence}"))
                        continue
                    code_cell.metadata["astro_jupyter"] = {"tool": "kernel_run", "tool_call_id": _scalar(item.get("id")),
                                                           "subagent_id": _scalar(item.get("subagent_id"))}
                    nb.cells.append(code_cell)
                    count += 1
                    continue
                if isinstance(name, str) and name in agent_steps and name in registered:
                    output = (result or {}).get("output", "(no result recorded)")
                    nb.cells.append(nbf.new_markdown_cell(
                        f"*Agent step* `{name}`\n\n{_fenced(_json_text(args)[:300])}\n\n{_fenced(output)}"))
                    continue
                why = not_run_reason(result)
                if why is not None:
                    nb.cells.append(nbf.new_markdown_cell(_unexported_call_cell(name, args, result, why)))
                    continue
                source = safe_tool_cell(name, args, registered, agent_steps)
                if source is not None and name in CATALOG_TOOLS:
                    source = catalog_cell_source(result) or source
                if source is None:
                    nb.cells.append(nbf.new_markdown_cell(_unexported_call_cell(name, args, result)))
                    continue
                cell = nbf.new_code_cell(source, execution_count=count)
                cell.outputs = tool_outputs(name, args, result, count)
                cell.metadata["astro_jupyter"] = {
                    "tool_call_id": _scalar(item.get("id")), "subagent_id": _scalar(item.get("subagent_id")),
                    "duration_ms": _scalar((result or {}).get("duration_ms")),
                    "is_error": bool((result or {}).get("is_error")),
                }
                nb.cells.append(cell)
                count += 1
        tool_total += calls
        status = "" if run is None or run.status in ("finished", "running") else f" *(run {run.status})*"
        answer = use_keys(turn.answer, bib.cited) if bib is not None else turn.answer
        nb.cells.append(nbf.new_markdown_cell(f"**Answer**{status}\n\n{answer or '*(no answer was given)*'}"))
        if run is not None:
            run_meta.append({"run_id": run.id, "status": run.status, "model": run.model, "started_at": run.started_at,
                             "finished_at": run.finished_at, "tool_calls": calls})
    if in_kernel:
        nb.cells.insert(1, nbf.new_markdown_cell(KERNEL_NOTE))
    if bib is not None and bib.entries:
        nb.cells.append(nbf.new_markdown_cell(_references(bib)))
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.metadata["astro_jupyter"] = {
        "session_id": session.id, "title": session.title, "model": model, "created_at": session.created_at,
        "updated_at": session.updated_at, "exported_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "version": __version__, "runs": run_meta, "tool_calls": tool_total,
    }
    _clean_surrogates(nb)
    nbformat.validate(nb)
    return nb


def _scalar(value: Any) -> str | int | float | bool | None:
    """A metadata value as recorded when it is a plain scalar, else its text (never a structure)."""
    return value if value is None or isinstance(value, (str, int, float, bool)) else _json_text(value)


def _references(bib: "BibResult") -> str:
    """The last cell: each cited key with what it names (escaped: the titles are untrusted text)."""
    lines = ["## References", "", "BibTeX for these keys is in the `.bib` file written beside this notebook.", ""]
    lines += [f"- [@{_one_line(e.key)}] {_one_line(e.paper_id)} ({'NASA ADS' if e.source == 'ads' else 'library metadata'})"
              for e in bib.entries]
    return "\n".join(lines)


@dataclass(frozen=True)
class ResearchLog:
    """What ``write_research_log`` wrote: the notebook, its ``.bib``, and papers left out or made locally (why)."""

    notebook: Path
    bibtex: Path
    problems: list[str]


def _notebook_path(path: str | os.PathLike[str]) -> Path:
    target = Path(path)
    if target.suffix != ".ipynb":
        target = target.with_suffix(target.suffix + ".ipynb") if target.suffix else target.with_suffix(".ipynb")
    return target


def _write_atomic(target: Path, write: Any) -> None:
    """``write(fh)`` into a temp file renamed over ``target``."""
    target.parent.mkdir(parents=True, exist_ok=True)
    # os.open with 0o666 lets the umask decide, like any file the user saves (mkstemp would make it 0600)
    tmp = str(target.parent / f".{target.name}.{uuid.uuid4().hex[:12]}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            write(fh)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


async def write_notebook(services: "ServiceContainer", session_id: str, path: str | os.PathLike[str],
                         *, bib: "BibResult | None" = None) -> Path:
    """Export and write atomically (temp file + rename); returns the written path."""
    import nbformat

    nb = await export_session(services, session_id, bib=bib)
    target = _notebook_path(path)
    _write_atomic(target, lambda fh: nbformat.write(nb, fh))
    return target


async def write_research_log(services: "ServiceContainer", session_id: str, path: str | os.PathLike[str]) -> ResearchLog:
    """The notebook and, beside it (same name, ``.bib``), the BibTeX of every paper its answers cite
    that the library holds (no metadata lookups: an export works offline; ADS is asked for its entries
    when a token is set, local entries otherwise)."""
    await services.sessions.get(session_id)  # SessionNotFound before anything is looked up
    messages = await services.messages.list(session_id)
    bib = await services.bibtex.for_texts((m.content for m in messages if m.role == "assistant"), fetch=False)
    notebook = await write_notebook(services, session_id, path, bib=bib)
    header = f"% BibTeX of the papers cited in astro-jupyter session {session_id} ({notebook.name})\n"
    header += "".join(f"% note: {' '.join(p.split())}\n" for p in bib.problems)
    bib_path = notebook.with_suffix(".bib")
    _write_atomic(bib_path, lambda fh: fh.write(header + "\n" + bib.text))
    return ResearchLog(notebook, bib_path, list(bib.problems))
