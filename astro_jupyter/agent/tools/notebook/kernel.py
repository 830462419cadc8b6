"""``kernel_inspect`` and ``kernel_run``: the agent sees and uses the live kernel of a ``%%astro`` run.

They exist only where there is a user namespace: the kernel surface builds them around a
``KernelAccess`` (``kernel/namespace.py``), which does the work on the kernel's main
thread. Elsewhere (the sidebar's server, the CLI) the registry marks them unavailable
with ``UNAVAILABLE`` so a call gets that reason instead of "unknown tool".

``kernel_run`` executes code in the user's own namespace, so it asks first (default Ask;
with nobody to answer, the executor denies). Its code becomes a real code cell of the
exported research log (``export.py``) — only when it really ran.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..base import AgentTool, InterruptBehavior, PermissionRule, ToolContext, ToolOutput

UNAVAILABLE = {
    "kernel_inspect": "it reads the variables of a notebook kernel, so it works only inside a %%astro cell "
    "(or %astro kernel_inspect) in that kernel; here, read files with read_file or notebooks with notebook_read",
    "kernel_run": "it runs code in the namespace of a notebook kernel, so it works only inside a %%astro cell in "
    "that kernel; here, add a cell with notebook_edit and run it with notebook_run",
}


class KernelAccess(Protocol):
    """The kernel surface's side: summaries and execution in the user's namespace."""

    async def inspect(self, name: str | None, reveal: bool = False) -> dict[str, Any]: ...
    async def run(self, code: str) -> dict[str, Any]: ...


class KernelInspectTool(AgentTool):
    name = "kernel_inspect"
    description = (
        "Look at the live variables of the user's kernel: without name, every user variable (name, type, one-line "
        "summary); with name, a summary of that object (arrays: shape/dtype/range/NaNs; DataFrames: columns, dtypes, "
        "head; astropy Tables: columns with units; SkyCoord: frame and first entries; FITS HDUList: info)."
    )
    parameters = {
        "type": "object",
        "properties": {"name": {"type": "string", "description": "A variable name or dotted attribute (e.g. hdul, t.colnames)."}},
        "additionalProperties": False,
    }
    is_readonly = True

    def __init__(self, access: KernelAccess) -> None:
        self.access = access

    def permission_scope(self, args: dict[str, Any]) -> str:
        """An "always" answer to showing a value that may hold secrets covers that one name."""
        name = args.get("name")
        return name.strip() if isinstance(name, str) else ""

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        """Look (running none of the user's code); a value that may hold secrets is shown only after
        a question that says so, asked once the kernel has said why."""
        name = args.get("name")
        name = name.strip() if isinstance(name, str) and name.strip() else None
        result = await self.access.inspect(name)
        if result.get("secret"):
            why = "; ".join(result["secret"])
            question = (f"kernel_inspect wants to show `{name}`, which may hold secrets ({why}). If you allow it, "
                        "its value is sent to the model, stored in this session and written to its exported log.")
            if ctx.confirm is None:
                decision_reason, allowed = "no one was asked", False
            else:
                decision = await ctx.confirm(question)
                decision_reason = decision.reason.replace(question, "").strip(" ;()") or decision.reason
                allowed = decision.allowed
            if not allowed:
                return ToolOutput.error(
                    f"kernel_inspect: `{name}` was not shown: it may hold secrets ({why}), and showing it was not "
                    f"allowed ({decision_reason}).", name=name, secret=True, shown=False)
            result = await self.access.inspect(name, True)
        if result.get("error"):
            return ToolOutput.error(f"kernel_inspect: {result['error']}", name=name)
        return ToolOutput(str(result.get("text", "")), metadata={k: v for k, v in result.items() if k != "text"})


class KernelRunTool(AgentTool):
    name = "kernel_run"
    description = (
        "Run Python code in the user's kernel namespace (their variables; new names stay defined). Returns stdout, "
        "stderr, the value of a final expression or the error's last frames; figures and rich results are shown in "
        "the cell. Plain Python only (no %magics or !shell). The user is asked first."
    )
    parameters = {
        "type": "object",
        "properties": {"code": {"type": "string", "description": "Python code to execute."}},
        "required": ["code"],
        "additionalProperties": False,
    }
    interrupt_behavior = InterruptBehavior.BLOCK  # code on the kernel's thread finishes (interrupt the kernel to stop it)

    def __init__(self, access: KernelAccess) -> None:
        self.access = access

    def check_permissions(self, args: dict[str, Any]) -> list[PermissionRule]:
        # no (shortened) copy of the code here: every surface shows the ``code`` argument in full
        return [PermissionRule("ask", self.name, "kernel_run wants to run the code below in your kernel's namespace")]

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        code = args.get("code")
        if not isinstance(code, str) or not code.strip():
            return ToolOutput.error("kernel_run: code is empty")
        result = await self.access.run(code)
        meta = {"code": code, **result}
        return ToolOutput(render_run(result), is_error=bool(result.get("error")), metadata=meta)


def render_run(result: dict[str, Any]) -> str:
    parts: list[str] = []
    for key in ("stdout", "stderr"):
        if result.get(key):
            parts.append(f"{key}:\n{result[key].rstrip()}")
    if result.get("error"):
        err = result["error"]
        frames = "\n".join(err.get("frames") or [])
        parts.append(f"error:\n{frames}\n{err.get('ename')}: {err.get('evalue')}".replace("\n\n", "\n"))
    elif result.get("result") is not None:
        parts.append(f"result: {result['result']}")
    if result.get("displayed"):
        parts.append("displayed in the cell: " + ", ".join(result["displayed"]))
    return "\n".join(parts) if parts else "(ran; no output)"


def kernel_tools(access: KernelAccess) -> list[AgentTool]:
    return [KernelInspectTool(access), KernelRunTool(access)]
