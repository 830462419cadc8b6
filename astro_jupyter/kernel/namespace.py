"""The kernel side of ``kernel_inspect`` / ``kernel_run``: the user's namespace, on the kernel's main thread.

The agent runs on the runtime's loop thread; user objects (and matplotlib, and IPython's
display machinery) belong to the kernel's main thread. ``ShellAccess`` hands each request
to that thread through ``KernelLoopThread.on_main``: the cell's follower loop (``%%astro``) or
the waiting ``%astro`` call runs it between events, so code executes exactly where the
user's own cells do, and its ``display()`` output lands in the running cell, under the
timeline.

``kernel_run`` executes plain Python in ``shell.user_ns``: stdout/stderr are captured for
the model, the value of a final expression is shown in the cell (like ``Out[]``) and
returned as a repr, an exception returns its last frames, and figures the code created are
displayed (and closed, under the inline backend, so the cell does not show them twice).
Everything published to the cell is noted for the model (``[image/png 640×480]``).
"""

from __future__ import annotations

import ast
import asyncio
import io
import itertools
import linecache
import re
import sys
import time
import traceback
from contextlib import redirect_stderr, redirect_stdout
from typing import TYPE_CHECKING, Any

from ..services.notebooks.cells import image_size
from .inspect import NotEvaluated, cut, secret_reasons, static_attr, summarize, type_name, user_variables

if TYPE_CHECKING:
    from ..config import AstroConfig
    from .loop_thread import KernelLoopThread

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_ids = itertools.count(1)
INSPECT_MAX_CHARS = 4000  # kernel_inspect cuts one summary here
INSPECT_MAX_VARS = 200  # kernel_inspect without a name lists at most this many variables
RUN_MAX_OUTPUT_CHARS = 20_000  # kernel_run keeps this much of stdout and of stderr for the model
TRACEBACK_FRAMES = 3  # an error's last traceback entries the model sees
SECRET_HIDDEN = "(not shown: may hold secrets; kernel_inspect with its name asks you first)"


def _repr(value: Any) -> str:
    try:
        return repr(value)
    except Exception as exc:  # noqa: BLE001
        return f"<repr failed: {type(exc).__name__}: {exc}>"


def describe_display(data: dict[str, Any], metadata: dict[str, Any]) -> str:
    """What the user saw in the cell, for the model: ``[image/png 640×480]``, ``[text/html]``; plain text is skipped."""
    parts = []
    for mime in sorted(k for k in data if k != "text/plain"):
        size = image_size(mime, data[mime]) if mime.startswith("image/") else None
        parts.append(f"[{mime} {size[0]}×{size[1]}]" if size else f"[{mime}]")
    return " ".join(parts)


class ShellAccess:
    """``KernelAccess`` for one IPython shell (see ``agent/tools/notebook/kernel.py``)."""

    def __init__(self, shell: Any, runtime: "KernelLoopThread", config: "AstroConfig") -> None:
        self.shell = shell
        self.runtime = runtime
        self.config = config

    async def inspect(self, name: str | None, reveal: bool = False) -> dict[str, Any]:
        return await asyncio.wrap_future(self.runtime.on_main(self.inspect_now, (name, reveal)))

    async def run(self, code: str) -> dict[str, Any]:
        return await asyncio.wrap_future(self.runtime.on_main(self.run_now, code))

    # -- on the main thread ----------------------------------------------------------------------
    def inspect_now(self, request: tuple[str | None, bool]) -> dict[str, Any]:
        """A summary that runs none of the user's code (``inspect.py``). A value that may hold secrets
        comes back as ``{"secret": [reasons]}`` unless ``reveal`` (the user allowed showing it)."""
        name, reveal = request
        ns = self.shell.user_ns
        limit = INSPECT_MAX_CHARS
        if name is None:
            return self._listing(ns, limit)
        if not _NAME.match(name) or any(part.startswith("__") for part in name.split(".")):
            return {"error": f"{name!r} is not a variable name or dotted attribute (like t or hdul.info)"}
        head, *rest = name.split(".")
        if head not in ns:
            close = [v for v, _ in user_variables(ns) if v.lower().startswith(head[:2].lower())][:10]
            hint = f"; similar: {', '.join(close)}" if close else ""
            return {"error": f"no variable {head!r} in the kernel{hint}"}
        obj = dict.__getitem__(ns, head)
        chain = [obj]
        try:
            for attr in rest:
                obj = static_attr(obj, attr)
                chain.append(obj)
        except NotEvaluated as exc:
            return {"error": f"{name}: not evaluated: {exc}"}
        except Exception as exc:  # noqa: BLE001 - a library property may raise anything
            return {"error": f"{name}: {type(exc).__name__}: {exc}"}
        reasons = secret_reasons(name.split("."), chain)
        if reasons and not reveal:
            return {"secret": reasons, "name": name, "type": type_name(obj)}
        kind, one, full = summarize(obj, limit)
        return {"text": f"{name}: {full}", "name": name, "type": kind, "summary": one}

    def _listing(self, ns: dict[str, Any], limit: int) -> dict[str, Any]:
        """Every user variable with a one-line summary; one that may hold secrets by its type only."""
        variables = user_variables(ns, getattr(self.shell, "user_ns_hidden", None))
        shown = variables[: INSPECT_MAX_VARS]
        rows = []
        for var, value in shown:
            if secret_reasons([var], [value]):
                rows.append({"name": var, "type": type_name(value), "summary": SECRET_HIDDEN})
                continue
            kind, one, _ = summarize(value, 0)
            rows.append({"name": var, "type": kind, "summary": one})
        lines = [f"{len(variables)} user variables" + ("" if len(shown) == len(variables) else f" (first {len(shown)})")]
        lines += [f"{r['name']:<20} {r['type']:<16} {r['summary']}" for r in rows]
        if not rows:
            lines = ["no user variables yet"]
        return {"text": cut("\n".join(lines), limit * 4), "variables": rows}

    def run_now(self, code: str) -> dict[str, Any]:
        started = time.perf_counter()
        filename = f"<kernel_run-{next(_ids)}>"
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)  # source lines in tracebacks
        out, err = io.StringIO(), io.StringIO()
        result: dict[str, Any] = {"stdout": "", "stderr": "", "result": None, "error": None, "displayed": []}
        try:
            tree = ast.parse(code, filename, "exec")
        except SyntaxError as exc:
            frames = traceback.format_exception_only(type(exc), exc)
            result["error"] = {"ename": "SyntaxError", "evalue": str(exc.msg), "frames": [f.rstrip() for f in frames[:-1]]}
            return self._finish(result, out, err, started)
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        ns = self.shell.user_ns
        pyplot = sys.modules.get("matplotlib.pyplot")
        before = set(pyplot.get_fignums()) if pyplot is not None else set()
        published: list[dict[str, Any]] = []
        restore = self._watch_display(published)
        value = None
        try:
            with redirect_stdout(out), redirect_stderr(err):
                exec(compile(tree, filename, "exec"), ns)  # noqa: S102 - the user allowed this code
                if last is not None:
                    value = eval(compile(ast.Expression(last.value), filename, "eval"), ns)  # noqa: S307
        except KeyboardInterrupt:
            restore()
            raise
        except BaseException as exc:  # noqa: BLE001 - SystemExit too: the kernel must survive user code
            result["error"] = self._error(exc)
        try:
            if value is not None:
                result["result"] = cut(_repr(value), RUN_MAX_OUTPUT_CHARS)
                ns["_"] = value
                self._display(value)
            self._show_new_figures(before)
        except Exception as exc:  # noqa: BLE001 - a broken _repr_html_ must not lose the run's result
            err.write(f"(showing the result in the cell failed: {type(exc).__name__}: {exc})\n")
        finally:
            restore()
        result["displayed"] = [d for d in (describe_display(p["data"], p["metadata"]) for p in published) if d]
        return self._finish(result, out, err, started)

    def _finish(self, result: dict[str, Any], out: io.StringIO, err: io.StringIO, started: float) -> dict[str, Any]:
        limit = RUN_MAX_OUTPUT_CHARS
        result["stdout"], result["stderr"] = cut(out.getvalue(), limit), cut(err.getvalue(), limit)
        result["executed"] = True
        result["duration_ms"] = round((time.perf_counter() - started) * 1000, 3)
        return result

    def _error(self, exc: BaseException) -> dict[str, Any]:
        frames = traceback.extract_tb(exc.__traceback__)
        frames = [f for f in frames if not f.filename.endswith("namespace.py")]  # drop our exec frame
        keep = TRACEBACK_FRAMES
        text = traceback.format_list(frames[-keep:])
        return {"ename": type(exc).__name__, "evalue": str(exc)[:2000], "frames": [t.rstrip() for t in text]}

    def _watch_display(self, published: list[dict[str, Any]]) -> Any:
        """Note what reaches the cell through IPython's display publisher (figures, tables, display())."""
        pub = getattr(self.shell, "display_pub", None)
        original = getattr(pub, "publish", None)
        if pub is None or original is None:
            return lambda: None

        def publish(data: dict[str, Any], metadata: dict[str, Any] | None = None, *args: Any, **kwargs: Any) -> Any:
            published.append({"data": dict(data or {}), "metadata": dict(metadata or {})})
            return original(data, metadata, *args, **kwargs)

        pub.publish = publish

        def restore() -> None:
            if pub.__dict__.get("publish") is publish:
                del pub.publish

        return restore

    @staticmethod
    def _display(value: Any) -> None:
        from IPython.display import display

        display(value)

    def _show_new_figures(self, before: set[int]) -> None:
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is None:
            return
        inline = "inline" in str(sys.modules["matplotlib"].get_backend()).lower()
        for number in sorted(set(pyplot.get_fignums()) - before):
            fig = pyplot.figure(number)
            self._display(fig)
            if inline:  # shown now; the inline backend would show it again when the cell ends
                pyplot.close(fig)
