"""Command hooks: a shell command gets the event as JSON on stdin and may answer JSON on stdout.

Answers understood (one JSON object; empty stdout means "continue")::

    {"decision": "block", "reason": "..."}      {"decision": "continue"}
    {"mutate_input": {...}}                      {"append_context": "..."}
    {"mutate_output": "..."}

Several keys may appear together. A non-zero exit, output that is not a JSON object, or
a command still running at its timeout (its whole process group is killed) becomes a
warning decision, i.e. the run carries on: a broken hook script must not stop research.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Mapping

from ..proc import kill_process_group
from .base import Hook, HookDecision, HookEventName, HookResult

log = logging.getLogger(__name__)

_MAX_STDERR = 500


class CommandHook(Hook):
    def __init__(self, event: HookEventName, command: str, matcher: str = "*", timeout: float = 10.0) -> None:
        self.event = event
        self.command = command
        self.matcher = matcher or "*"
        self.timeout = float(timeout)
        self.name = f"command {command!r}"

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], *, default_timeout: float = 10.0) -> "CommandHook":
        """Build from a config dict ``{"event","command","matcher","timeout"}``."""
        if not isinstance(spec, Mapping):
            raise TypeError("a command hook must be a dict")
        command = str(spec.get("command") or "").strip()
        if not command:
            raise ValueError("'command' is empty")
        event = HookEventName.parse(str(spec.get("event") or ""))
        timeout = float(spec.get("timeout") or default_timeout)
        if timeout <= 0:
            raise ValueError("'timeout' must be positive")
        return cls(event, command, str(spec.get("matcher") or "*"), timeout)

    def handles(self, event: HookEventName) -> bool:
        return event is self.event

    async def __call__(self, event: HookEventName, payload: dict[str, Any]) -> HookResult:
        data = json.dumps({**payload, "event": event.value}, ensure_ascii=False, default=str).encode("utf-8")
        try:
            proc = await asyncio.create_subprocess_shell(
                self.command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,  # own process group, so a timeout kills its children too
            )
        except OSError as exc:
            return self._warn(f"could not start: {exc}")
        try:
            stdout, stderr = await asyncio.wait_for(proc.communicate(data), self.timeout)
        except asyncio.TimeoutError:
            await _kill(proc)
            return self._warn(f"timed out after {self.timeout:g}s and was killed")
        except asyncio.CancelledError:
            await _kill(proc)
            raise
        if proc.returncode != 0:
            detail = stderr.decode("utf-8", "replace").strip()[:_MAX_STDERR]
            return self._warn(f"exited with status {proc.returncode}" + (f": {detail}" if detail else ""))
        return self._parse(stdout.decode("utf-8", "replace").strip())

    def _parse(self, text: str) -> HookResult:
        if not text:
            return None
        try:
            answer = json.loads(text)
        except ValueError:
            return self._warn(f"printed invalid JSON: {text[:200]!r}")
        if not isinstance(answer, dict):
            return self._warn(f"answered {type(answer).__name__}, expected a JSON object")
        out: list[HookDecision] = []
        if "mutate_input" in answer:
            if isinstance(answer["mutate_input"], dict):
                out.append(HookDecision.mutate_input(answer["mutate_input"]))
            else:
                out.append(HookDecision.warning(f"{self.describe()}: mutate_input must be an object"))
        if isinstance(answer.get("append_context"), str):
            out.append(HookDecision.append_context(answer["append_context"]))
        if isinstance(answer.get("mutate_output"), str):
            out.append(HookDecision.mutate_output(answer["mutate_output"]))
        decision = str(answer.get("decision") or "").lower()
        if decision == "block":
            out.append(HookDecision.block(str(answer.get("reason") or f"blocked by {self.describe()}")))
        elif decision not in ("", "continue", "approve", "allow"):
            out.append(HookDecision.warning(f"{self.describe()}: unknown decision {decision!r} ignored"))
        return out

    def _warn(self, what: str) -> HookDecision:
        message = f"{self.event.value} hook {self.describe()} {what}"
        log.warning(message)
        return HookDecision.warning(message)


async def _kill(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is not None:
        return
    kill_process_group(proc)
    try:
        await asyncio.wait_for(proc.wait(), 5.0)
    except asyncio.TimeoutError:
        log.warning("hook process %s did not exit after SIGKILL", proc.pid)
