"""``run_bash``: one shell command in the project root, with its own timeout and output cap.

The command runs in a new process group so a timeout or a cancel kills the whole
pipeline, not just the shell. Output beyond ``MAX_OUTPUT_CHARS`` keeps its head
and tail (errors usually sit at the end). Every call asks for permission by default:
a shell escapes the path sandbox, so a person decides.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from ...proc import kill_process_group
from ..base import AgentTool, InterruptBehavior, PermissionRule, ToolContext, ToolOutput

MAX_TIMEOUT_SECS = 3600.0
DEFAULT_TIMEOUT_SECS = 120.0  # a command the model gave no timeout
MAX_OUTPUT_CHARS = 30_000  # longer output keeps its head and tail, the middle dropped
SHORT_COMMAND_CHARS = 80  # a command this short and free of control characters is quoted in the question


def truncate_middle(text: str, limit: int) -> tuple[str, bool]:
    """Keep the first and last halves of ``limit`` characters, say how much was dropped."""
    if limit <= 0 or len(text) <= limit:
        return text, False
    head = text[: limit // 2]
    tail = text[-(limit - limit // 2) :]
    return f"{head}\n... [{len(text) - limit} characters truncated] ...\n{tail}", True


class RunBashTool(AgentTool):
    name = "run_bash"
    defer_loading = True
    max_output_chars = MAX_OUTPUT_CHARS
    description = (
        "Run a shell command (bash) in the project root and return its exit code, stdout and stderr. "
        "Has a timeout (seconds) and truncates long output; asks the user for permission first."
    )
    parameters = {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The command line."},
            "timeout": {"type": "number", "exclusiveMinimum": 0, "description": "Seconds before the command is killed."},
        },
        "required": ["command"],
        "additionalProperties": False,
    }
    interrupt_behavior = InterruptBehavior.CANCEL

    def check_permissions(self, args: dict[str, Any]) -> list[PermissionRule]:
        command = str(args.get("command", ""))
        # Never a shortened copy (it hid the tail that ran): a short plain command is quoted
        # whole, anything else is described, and every surface shows the ``command`` argument
        # in full with control and bidi characters made visible.
        if len(command) <= SHORT_COMMAND_CHARS and command.isprintable():
            return [PermissionRule("ask", "run_bash", f"run_bash wants to run: {command}")]
        lines = command.count("\n") + 1
        return [PermissionRule("ask", "run_bash", f"run_bash wants to run a shell command ({len(command)} characters, "
                                                  f"{lines} line{'s' if lines != 1 else ''}; shown in full)")]

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            return ToolOutput.error("run_bash: command must be a non-empty string")
        if "\x00" in command:
            return ToolOutput.error("run_bash: command contains a NUL byte")
        try:
            timeout = float(args.get("timeout") or DEFAULT_TIMEOUT_SECS)
        except (TypeError, ValueError):
            return ToolOutput.error(f"run_bash: timeout must be a number of seconds, got {args.get('timeout')!r}")
        if not 0 < timeout <= MAX_TIMEOUT_SECS:
            return ToolOutput.error(f"run_bash: timeout must be between 0 and {MAX_TIMEOUT_SECS:.0f} seconds")
        cwd = Path(ctx.config.project_root or os.getcwd())
        try:
            proc = await asyncio.create_subprocess_exec(
                "bash", "-c", command,
                cwd=str(cwd),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            return ToolOutput.error(f"run_bash: cannot start bash: {exc}")

        communicate = asyncio.ensure_future(proc.communicate())
        cancel_wait = asyncio.ensure_future(ctx.cancelled.wait())
        outcome = "exited"
        try:
            done, _ = await asyncio.wait({communicate, cancel_wait}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            if communicate not in done:
                outcome = "cancelled" if cancel_wait in done else "timeout"
                kill_process_group(proc)
        except asyncio.CancelledError:
            kill_process_group(proc)
            communicate.cancel()
            raise
        finally:
            cancel_wait.cancel()
        stdout_b, stderr_b = await communicate
        return self._result(command, outcome, proc.returncode, stdout_b, stderr_b, timeout, ctx)

    def _result(
        self, command: str, outcome: str, code: int | None, out: bytes, err: bytes, timeout: float, ctx: ToolContext
    ) -> ToolOutput:
        limit = self.max_output_chars
        stdout, cut_out = truncate_middle(out.decode("utf-8", errors="replace"), limit)
        stderr, cut_err = truncate_middle(err.decode("utf-8", errors="replace"), limit)
        if outcome == "timeout":
            head = f"Command timed out after {timeout:g} s and was killed."
        elif outcome == "cancelled":
            head = "Command cancelled by the user and killed."
        else:
            head = f"Exit code {code}"
        parts = [head]
        if stdout:
            parts.append("stdout:\n" + stdout.rstrip("\n"))
        if stderr:
            parts.append("stderr:\n" + stderr.rstrip("\n"))
        if not stdout and not stderr:
            parts.append("(no output)")
        meta = {
            "command": command,
            "exit_code": code,
            "outcome": outcome,
            "truncated": cut_out or cut_err,
            "stdout_chars": len(out),
            "stderr_chars": len(err),
        }
        return ToolOutput("\n".join(parts), is_error=outcome != "exited" or code != 0, metadata=meta)
