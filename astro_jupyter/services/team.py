"""File inboxes for teammates under ``ASTRO_HOME/team/``: one file per message, moved, never rewritten.

A team belongs to the identity whose run made it: ``team/`` for ownerless runs (the kernel,
the CLI, the shared-token user: one person), ``team/owners/<key>/`` for a named identity
(``services/owners.py``); no other identity's tools reach it (``ServiceContainer.team_for``).

Layout, per member ``<team>/<name>/``: ``profile.json``, ``inbox/`` (unread), ``read/``
(delivered to the reader), ``corrupt/`` (files that could not be parsed, kept for a human).

Why one file per message: a writer creates ``inbox/.tmp-<uuid>`` and ``os.replace``s it to
``inbox/<time_ns>-<uuid>.json``, so a reader never sees half a message and concurrent writers
never touch the same file. A reader *claims* a message by ``os.replace`` into ``read/``; only
one of two racing readers can succeed, so no message is delivered twice, and nothing is
deleted, so none is lost. The kernel and the server may both write: this works across
processes, with no lock. A file that fails to parse is moved to ``corrupt/`` and reported
with its path; the other messages are still delivered.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import AstroError
from .owners import OWNERS_DIR

LEAD = "lead"
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")


class TeamError(AstroError):
    reason = "team"


@dataclass
class InboxRead:
    messages: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def check_name(name: str) -> str:
    clean = (name or "").strip().lower()
    if not _NAME.match(clean):
        raise TeamError(
            f"invalid teammate name {name!r}: use 1-32 lower-case letters, digits, '-' or '_', starting with a letter or digit"
        )
    if clean == OWNERS_DIR:
        raise TeamError(f"{clean!r} is reserved (it holds the teams of named users); choose another name")
    return clean


def _write_atomic(directory: Path, final_name: str, data: bytes) -> Path:
    tmp = directory / f".tmp-{uuid.uuid4().hex}"
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    final = directory / final_name
    os.replace(tmp, final)
    return final


class TeamInbox:
    def __init__(self, team_dir: Path) -> None:
        self.team_dir = Path(team_dir)

    def _member_dir(self, name: str) -> Path:
        return self.team_dir / check_name(name)

    def _ensure(self, name: str) -> Path:
        base = self._member_dir(name)
        for sub in ("inbox", "read", "corrupt"):
            (base / sub).mkdir(parents=True, exist_ok=True)
        return base

    # -- members -----------------------------------------------------------------------
    def register(self, name: str, role: str = "", **extra: Any) -> dict[str, Any]:
        base = self._ensure(name)
        profile = {"name": check_name(name), "role": role, "created_at": time.time(), **extra}
        _write_atomic(base, "profile.json", json.dumps(profile).encode())
        return profile

    def set_status(self, name: str, status: str, **extra: Any) -> None:
        base = self._ensure(name)
        profile = self.profile(name) or {"name": check_name(name)}
        profile.update(status=status, **extra)
        _write_atomic(base, "profile.json", json.dumps(profile).encode())

    def profile(self, name: str) -> dict[str, Any] | None:
        path = self._member_dir(name) / "profile.json"
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def members(self) -> list[str]:
        if not self.team_dir.is_dir():
            return []
        return sorted(p.name for p in self.team_dir.iterdir() if p.is_dir() and _NAME.match(p.name) and p.name != OWNERS_DIR)

    def exists(self, name: str) -> bool:
        return check_name(name) == LEAD or (self._member_dir(name) / "profile.json").is_file()

    # -- messages ----------------------------------------------------------------------
    def send(self, to: str, sender: str, content: str, *, kind: str = "message") -> dict[str, Any]:
        if not content.strip():
            raise TeamError("empty message: nothing to send")
        base = self._ensure(to)
        message = {
            "id": f"msg_{uuid.uuid4().hex[:12]}",
            "from": check_name(sender),
            "to": check_name(to),
            "kind": kind,
            "content": content,
            "created_at": time.time(),
        }
        _write_atomic(base / "inbox", f"{time.time_ns():020d}-{message['id']}.json", json.dumps(message).encode())
        return message

    def broadcast(self, sender: str, content: str) -> list[str]:
        """Send to every member but the sender (the lead included); returns the recipients."""
        sender = check_name(sender)
        recipients = [m for m in sorted(set(self.members()) | {LEAD}) if m != sender]
        for member in recipients:
            self.send(member, sender, content, kind="broadcast")
        return recipients

    def read(self, name: str, *, consume: bool = True) -> InboxRead:
        """Unread messages in arrival order; with ``consume`` each is claimed (moved to read/)."""
        base = self._ensure(name)
        inbox, done, corrupt = base / "inbox", base / "read", base / "corrupt"
        out = InboxRead()
        for entry in sorted(inbox.iterdir()):
            if entry.name.startswith(".") or not entry.is_file():
                continue
            path = entry
            if consume:
                claimed = done / entry.name
                try:
                    os.replace(entry, claimed)
                except FileNotFoundError:
                    continue  # another reader claimed it first
                path = claimed
            try:
                message = json.loads(path.read_text(encoding="utf-8"))
                if not isinstance(message, dict) or "content" not in message:
                    raise ValueError("not a message object")
            except (OSError, ValueError, UnicodeDecodeError) as exc:
                target = corrupt / entry.name
                try:
                    os.replace(path, target)
                except OSError:
                    target = path
                out.errors.append(f"inbox file {entry.name} of {name!r} is corrupted ({exc}); kept at {target}")
                continue
            out.messages.append(message)
        return out
