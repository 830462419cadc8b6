"""``%astro`` and ``%%astro``: every tool and the agent one line away in any IPython.

``%load_ext astro_jupyter`` only registers the magics and builds an ``AstroConfig`` from
the shell's config (so ``c.AstroConfig.x = ...`` in ``ipython_config.py`` works; env vars
otherwise). The kernel's runtime — a loop thread with the store and the agent — starts
on the first magic that needs it, so loading stays light. Sessions go to the same
database as the sidebar's.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class, no_var_expand

from ..cells.display import AgentAnswer, AstroResult, CatalogQueryResult, TableResult, records_table, tools_table
from ..cells.parsing import ArgumentSyntaxError, parse_tool_arguments
from .loop_thread import KernelLoopThread, RunInterrupted

PROMPT_WIDTH = 100  # columns a permission prompt wraps at when the terminal width is unknown (a notebook)

HELP = """\
%astro                              this help
%astro tools                        the tools (name, read-only, deferred, summary)
%astro TOOL key=value ...           run one tool, e.g. %astro query_target name="M 31"
%astro TOOL {"json": "object"}      ... or with a JSON object; {var} takes a value from your namespace
r = %astro TOOL ...                 r.content (text), r.data (structured), r.is_error
r = %astro query_catalog service=gaia adql="SELECT ..."   r.to_table(), r.to_pandas(), r.show_sky()
%astro subagent "TASK" [--max-steps N]
%astro history "QUERY" [--session S]
%astro sessions
%astro library list [--state S]     the paper library (not downloaded / downloaded / parsed)
%astro library add PDF|ARXIV|DOI    bring a local PDF or a paper by identifier into the library
%astro model [NAME]                 show or set the model of %%astro runs in this kernel
%astro export [SESSION] [-o PATH.ipynb]   the research log, and its BibTeX beside it (.bib)
%astro sky TARGET [--table VAR] [--fov DEG]   Aladin Lite view of TARGET (rows of table VAR overlaid);
                                    v = %astro sky ...; v.selection is what you selected, as a Table
%astro sky [TARGET] --result ID     ... with the rows of a stored query_catalog / cone_search result
                                    (its id, cat_...: the sidebar's "Show on sky" under a catalog result)
%%astro [--session S] [--new] [--model M] [--max-steps N] [--coordinator] [--allow TOOL,TOOL]
<prompt>                            ask the agent; the timeline streams below the cell.
                                    --allow: tools allowed without asking when no one can answer
                                    (nbconvert/nbclient/papermill); there every other question is denied at once.
Interrupt the kernel (■ / Ctrl-C) to stop a run; the session stays consistent."""

NOT_CONFIGURED = (
    "No LLM endpoint is configured. Set OPENAI_BASE_URL (and OPENAI_API_KEY if it needs one) before "
    "starting the kernel, or put c.AstroConfig.openai_base_url = '...' (and openai_api_key) in ipython_config.py."
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


def _parser(prog: str) -> _Parser:
    return _Parser(prog=prog, add_help=False)


def _split(line: str) -> list[str]:
    try:
        return shlex.split(line, comments=True)  # `%astro history "halo"  # a note` as in Python
    except ValueError as exc:
        raise UsageError(f"cannot read the arguments: {exc}") from None


@magics_class
class AstroMagics(Magics):
    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        from ..config import AstroConfig

        self.config_obj = AstroConfig(parent=shell)
        self.rt = KernelLoopThread(self.config_obj, shell)

    # -- dispatch ------------------------------------------------------------------------------------
    @no_var_expand
    @line_cell_magic
    def astro(self, line: str, cell: str | None = None) -> Any:
        """Run astro-jupyter tools and the agent (see ``%astro help``)."""
        if cell is not None:
            return self._agent(line, cell)
        command, _, rest = line.strip().partition(" ")
        if command in ("", "help", "-h", "--help"):
            print(HELP)
            return None
        handler = {
            "tools": self._tools, "sessions": self._sessions, "history": self._history, "model": self._model,
            "export": self._export, "subagent": self._subagent, "library": self._library, "sky": self._sky,
        }.get(command)
        try:
            return handler(rest) if handler is not None else self._tool(command, rest)
        except RunInterrupted:
            print(f"Interrupted: %astro {command} was cancelled; the kernel is ready.")
            return None

    # -- %astro TOOL ---------------------------------------------------------------------------------
    def _tool(self, name: str, rest: str) -> AstroResult | None:
        try:
            args = parse_tool_arguments(rest, self.shell.user_ns)
        except ArgumentSyntaxError as exc:
            raise UsageError(f"%astro {name}: {exc}") from None
        from .frontend import no_one_to_answer

        why = no_one_to_answer(self.shell)
        unattended = None
        if why is not None:  # a direct call names its tool: only the configured list applies
            from ..app.follow import Unattended

            allow = frozenset(n.strip() for n in self.config_obj.unattended_allow if n.strip())
            unattended = Unattended(why, allow, "c.AstroConfig.unattended_allow")
        try:
            run = self.rt.run_tool(name, args, ask_permission=self._ask_permission, on_event=self._progress,
                                   unattended=unattended)
        except RunInterrupted:
            print(f"Interrupted: {name} was cancelled; the kernel is ready.")
            return None
        kind = CatalogQueryResult if isinstance(run.metadata.get("catalog"), dict) else AstroResult
        return kind(run.tool, run.arguments, run.content, run.is_error, run.metadata, run.duration_ms)

    @staticmethod
    def _progress(event: Any) -> None:
        """Long tools (downloads, parsing) report progress while the cell waits."""
        if event.type == "tool_progress" and not event.subagent_id:
            p = event.progress
            count = f" {p.get('done')}/{p.get('total')}" if p.get("done") is not None and p.get("total") else ""
            print(f"…{count} {p.get('message', '')}".rstrip(), flush=True)

    def _ask_permission(self, request: Any) -> str:
        from .widgets import ask_text, print_permission

        print_permission(request, PROMPT_WIDTH)  # the whole request, escapes visible
        return ask_text(request, input)

    def _tools(self, rest: str) -> TableResult:
        return tools_table(self.rt.registry_sync())

    def _sessions(self, rest: str) -> TableResult:
        async def load() -> list[dict[str, Any]]:
            return await (await self.rt.app()).list_sessions(None, detail=False)

        rows = self.rt.call(load)
        return records_table(f"{len(rows)} sessions", rows, ["id", "title", "model", "source", "updated_at"],
                             "no sessions yet (start one with %%astro)")

    def _history(self, rest: str) -> TableResult:
        p = _parser("%astro history")
        p.add_argument("query", nargs="+")
        p.add_argument("--session")
        p.add_argument("--limit", type=int, default=20)
        ns = p.parse_args(_split(rest))
        query = " ".join(ns.query)

        async def search() -> list[dict[str, Any]]:
            page = await (await self.rt.app()).search_history(None, query, session_id=ns.session, limit=ns.limit)
            return page["results"]

        hits = self.rt.call(search)
        return records_table(f"history: {query}", hits, ["session_id", "session_title", "role", "snippet", "created_at"],
                             "no matches")

    def _library(self, rest: str) -> TableResult:
        p = _parser("%astro library")
        p.add_argument("action", choices=["list", "add"])
        p.add_argument("source", nargs="?", help="PDF path, arXiv id, DOI, bibcode or URL (add)")
        p.add_argument("--state", choices=["metadata", "downloaded", "parsed"])
        p.add_argument("--no-fetch", action="store_true", help="do not ask arXiv/ADS for metadata")
        ns = p.parse_args(_split(rest))
        if ns.action == "add" and not ns.source:
            raise UsageError("%astro library add: give a PDF path or an arXiv id / DOI / bibcode / URL")

        already: list[bool] = []

        async def run() -> list[dict[str, Any]]:
            app = await self.rt.app()
            if ns.action == "add":
                added = await app.add_local(ns.source, fetch=not ns.no_fetch)
                already.append(added.already)
                return [added.record.to_dict()]
            return await app.list_papers(state=ns.state)

        try:
            rows = self.rt.call(run)
        except Exception as exc:  # noqa: BLE001 - bad identifiers, unreadable files, failing services
            raise UsageError(f"%astro library {ns.action}: {exc}") from None
        if ns.action == "add":
            title = f"already in the library ({rows[0]['id']})" if already and already[0] else f"added {rows[0]['id']}"
        else:
            title = f"{len(rows)} papers"
        return records_table(title, rows, ["id", "title", "year", "state", "pdf_path"],
                             "the library is empty (try %astro library add FILE.pdf)")

    def _model(self, rest: str) -> str:
        name = rest.strip()
        if name:
            async def check() -> str:
                return await (await self.rt.app()).check_model(name)

            try:
                name = self.rt.call(check)
            except Exception as exc:  # noqa: BLE001 - an unknown name: the message lists the endpoint's models
                raise UsageError(f"%astro model: {exc}") from None
            self.rt.model = name
            print(f"%%astro runs in this kernel now use model {name!r}")
            return name
        current = self.rt.model or self.config_obj.llm_model
        print(f"model: {current}" + ("" if self.rt.model else " (the configured default, LLM_MODEL)"))
        return current

    def _export(self, rest: str) -> Path | None:
        p = _parser("%astro export")
        p.add_argument("session", nargs="?")
        p.add_argument("-o", "--output")
        ns = p.parse_args(_split(rest))
        session_id = ns.session or self.rt.session_id
        if not session_id:
            raise UsageError("%astro export: no session yet in this kernel; give a session id (see %astro sessions)")
        path = Path(ns.output or f"astro-{session_id}.ipynb")

        async def export() -> Any:
            return await (await self.rt.app()).write_session_notebook(None, session_id, path)

        try:
            log = self.rt.call(export)
        except Exception as exc:  # noqa: BLE001 - SessionNotFound and I/O errors shown plainly
            raise UsageError(f"%astro export: {exc}") from None
        print(f"research log written to {log.notebook}")
        print(f"bibliography written to {log.bibtex}" + "".join(f"\n  note: {p}" for p in log.problems))
        return log.notebook

    def _sky(self, rest: str) -> Any:
        p = _parser("%astro sky")
        p.add_argument("target", nargs="*")
        rows = p.add_mutually_exclusive_group()
        rows.add_argument("--table", help="a variable holding an astropy Table to overlay")
        rows.add_argument("--result", help="the id of a stored query_catalog / cone_search result to overlay")
        p.add_argument("--fov", type=float, help="field of view in degrees")
        ns = p.parse_args(_split(rest))
        table = None
        if ns.table is not None:
            if ns.table not in self.shell.user_ns:
                raise UsageError(f"%astro sky: no variable {ns.table!r} in the namespace")
            table = self.shell.user_ns[ns.table]
        elif ns.result is not None:
            table = self._stored_catalog(ns.result)
        if not ns.target and table is None:
            raise UsageError("%astro sky: give a target name (e.g. %astro sky NGC 1275) and/or --table VAR / --result ID")
        try:
            from .sky import SkyError, show_sky
        except ImportError as exc:
            raise UsageError(f"%astro sky needs the data extra (pip install 'astro-jupyter[data]'): {exc}") from None
        try:
            return show_sky(table, " ".join(ns.target) or None, fov=ns.fov)
        except SkyError as exc:
            raise UsageError(f"%astro sky: {exc}") from None

    def _stored_catalog(self, result_id: str) -> CatalogQueryResult:
        """A stored catalog result by its id, through the application layer (the kernel is the local
        user: ownerless, ``None``); its rows are read from the library's VOTable by ``to_table()``."""
        async def load() -> dict[str, Any]:
            return (await (await self.rt.app()).stored_catalog(None, result_id)).to_dict()

        from ..errors import NotFoundError

        try:
            record = self.rt.call(load)
        except NotFoundError as exc:
            raise UsageError(f"%astro sky: {exc}") from None
        return CatalogQueryResult.from_stored(record)

    def _subagent(self, rest: str) -> AgentAnswer | None:
        p = _parser("%astro subagent")
        p.add_argument("task", nargs="+")
        p.add_argument("--max-steps", type=int)
        ns = p.parse_args(_split(rest))
        self._require_llm()
        args: dict[str, Any] = {"task": " ".join(ns.task)}
        if ns.max_steps is not None:
            args["max_steps"] = ns.max_steps
        from .widgets import make_timeline

        timeline = make_timeline(self.shell)
        try:
            run = self.rt.run_tool("subagent", args, on_event=lambda e: (e.subagent_id or e.type == "subagent") and timeline.show(e))
        except RunInterrupted:
            timeline.finish("cancelled", "")
            print("Interrupted: the subagent was cancelled; the kernel is ready.")
            return None
        reason = "error" if run.is_error else "finished"
        timeline.finish(reason, "")
        return AgentAnswer(run.content, self.rt.session_id or "", reason=reason,
                           tool_calls=[{"name": e.name, "is_error": e.is_error, "subagent": e.subagent_id}
                                       for e in run.events if e.type == "tool_result" and e.subagent_id],
                           errors=[run.content] if run.is_error else [])

    # -- %%astro ---------------------------------------------------------------------------------------
    def _require_llm(self) -> None:
        if not self.config_obj.llm_configured:
            raise UsageError(NOT_CONFIGURED)

    def _agent(self, line: str, cell: str) -> AgentAnswer | None:
        p = _parser("%%astro")
        p.add_argument("--session")
        p.add_argument("--new", action="store_true")
        p.add_argument("--model")
        p.add_argument("--max-steps", type=int)
        p.add_argument("--coordinator", action="store_true")
        p.add_argument("--text", action="store_true", help="plain-text timeline even in a notebook")
        p.add_argument("--allow", action="append", default=[], help="tools allowed in an unattended run")
        ns = p.parse_args(_split(line))
        prompt = cell.strip()
        if not prompt:
            raise UsageError("%%astro: the cell is empty; write your question below the %%astro line")
        self._require_llm()
        session_id = None if ns.new else (ns.session or self.rt.session_id)
        unattended = self._unattended(ns.allow)
        from ..errors import AstroError

        try:
            handle = self.rt.start_run(
                prompt, session_id=session_id, model=ns.model or self.rt.model, max_steps=ns.max_steps,
                coordinator=ns.coordinator, unattended=unattended,
            )
        except RunInterrupted:  # an AstroError too: it must be caught first
            print("Interrupted before the run started.")
            return None
        except AstroError as exc:
            raise UsageError(f"%%astro: {exc}") from None
        self.rt.session_id = handle.session_id
        # unattended: widgets would be written to the output file unrendered; text lines say what happened
        return self._follow(handle, text=ns.text or unattended is not None)

    def _unattended(self, cell_allow: list[str]) -> Any:
        """The run's ``Unattended`` policy when no one can answer this cell (``frontend.py``), else None."""
        from .frontend import parse_allow, unattended_policy

        known = self.rt.registry_sync().names()
        try:
            parse_allow(cell_allow, known)  # a typo in --allow is an error wherever the cell runs
            return unattended_policy(self.shell, cell_allow, self.config_obj.unattended_allow, known)
        except ValueError as exc:
            raise UsageError(f"%%astro: the allow-list for unattended runs (--allow, unattended_allow): {exc}") from None

    def _question_timeout(self, event: Any) -> float:
        """Stop waiting on buttons when the run stops waiting: with no one to answer, a permission is denied."""
        return self.rt.call(self.rt.app).question_timeout(event)

    def _follow(self, handle: Any, *, text: bool) -> AgentAnswer:
        from .widgets import make_timeline

        timeline = make_timeline(self.shell, force_text=text, on_stop=lambda: self.rt.cancel_run(handle),
                                 width=PROMPT_WIDTH)
        calls: list[dict[str, Any]] = []
        errors: list[str] = []
        try:
            # the app follows the run; its questions come back here, after the event that shows them
            for event in self.rt.stream_events(handle, ask=lambda q: timeline.ask(q, timeout=self._question_timeout(q))):
                timeline.show(event)
                if event.type == "tool_result":
                    calls.append({"name": event.name, "is_error": event.is_error, "subagent": event.subagent_id})
                elif event.type == "error" and event.reason != "notice":
                    errors.append(event.message)
            done = self.rt.wait_run(handle)
        except (KeyboardInterrupt, RunInterrupted):
            self.rt.cancel_run(handle)
            try:
                self.rt.wait_run(handle)
            except RunInterrupted:
                pass
            timeline.finish("cancelled", handle.session_id)
            print(f"Interrupted: the run was cancelled. Session {handle.session_id} is saved; "
                  "continue it with another %%astro cell.")
            return AgentAnswer(handle.final_text, handle.session_id, handle.run_id, "cancelled", calls, errors, shown=True)
        except BaseException:
            # Anything else leaving the cell (a question that could not be shown, a display error)
            # must not leave the run holding the session: stop it, then let the error show.
            self.rt.cancel_run(handle)
            try:
                self.rt.wait_run(handle)
            except BaseException:  # noqa: BLE001 - the original error is the one to report
                pass
            timeline.finish("cancelled", handle.session_id)
            raise
        timeline.finish(done.reason, handle.session_id, handle.final_text)
        return AgentAnswer(handle.final_text, handle.session_id, handle.run_id, done.reason, calls, errors, shown=True)


_loaded: dict[int, AstroMagics] = {}


def load_ipython_extension(ip: Any) -> None:
    """Register the magics (idempotent: a second ``%load_ext`` keeps the running runtime)."""
    if id(ip) in _loaded:
        return
    magics = AstroMagics(ip)
    ip.register_magics(magics)
    _loaded[id(ip)] = magics


def unload_ipython_extension(ip: Any) -> None:
    magics = _loaded.pop(id(ip), None)
    if magics is not None:
        magics.rt.close()
        ip.magics_manager.magics["line"].pop("astro", None)
        ip.magics_manager.magics["cell"].pop("astro", None)
