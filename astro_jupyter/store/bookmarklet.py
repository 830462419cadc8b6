"""Bookmarklet tokens and the intake queue they feed (tables of ``0030_server.sql``).

A bookmarklet runs on a foreign page (arxiv.org, ADS), so it cannot carry the Jupyter
login cookie; it carries its own per-user token instead. Only a SHA-256 of the token is
stored: a stolen database does not let anyone queue papers, and rotating a token (one
row per owner, replaced) revokes the old one at once.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Any

from .db import Database, Row

TOKEN_BYTES = 32


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass
class IntakeItem:
    id: int
    owner: str
    identifier: str
    kind: str
    page_url: str
    page_title: str
    status: str
    paper_id: str | None
    error: str
    created_at: str
    updated_at: str

    @classmethod
    def from_row(cls, row: Row) -> "IntakeItem":
        return cls(**{k: row[k] for k in cls.__dataclass_fields__})

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class BookmarkletRepository:
    def __init__(self, db: Database) -> None:
        self.db = db

    # -- tokens ------------------------------------------------------------------------
    async def rotate(self, owner: str) -> str:
        """A fresh token for ``owner``; the previous one (if any) stops working now."""
        token = secrets.token_urlsafe(TOKEN_BYTES)
        await self.db.execute(
            "INSERT INTO bookmarklet_tokens (owner, token_hash) VALUES (?, ?)"
            " ON CONFLICT (owner) DO UPDATE SET token_hash = excluded.token_hash,"
            " created_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), last_used_at = NULL",
            (owner, hash_token(token)),
        )
        return token

    async def revoke(self, owner: str) -> bool:
        return await self.db.execute_rowcount("DELETE FROM bookmarklet_tokens WHERE owner = ?", (owner,)) > 0

    async def status(self, owner: str) -> dict[str, Any] | None:
        row = await self.db.fetchone(
            "SELECT created_at, last_used_at FROM bookmarklet_tokens WHERE owner = ?", (owner,)
        )
        return None if row is None else {"created_at": row["created_at"], "last_used_at": row["last_used_at"]}

    async def owner_for(self, token: str) -> str | None:
        """The owner a presented token belongs to, or None (unknown, rotated or revoked)."""
        if not token:
            return None
        row = await self.db.fetchone("SELECT owner FROM bookmarklet_tokens WHERE token_hash = ?", (hash_token(token),))
        if row is None:
            return None
        await self.db.execute(
            "UPDATE bookmarklet_tokens SET last_used_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE owner = ?",
            (row["owner"],),
        )
        return str(row["owner"])

    # -- intake queue --------------------------------------------------------------------
    async def enqueue(self, owner: str, identifier: str, kind: str, *, page_url: str = "", page_title: str = "") -> IntakeItem:
        item_id = await self.db.execute(
            "INSERT INTO bookmarklet_intake (owner, identifier, kind, page_url, page_title) VALUES (?, ?, ?, ?, ?)",
            (owner, identifier, kind, page_url[:2000], page_title[:500]),
        )
        return await self.get(item_id)

    async def get(self, item_id: int) -> IntakeItem:
        row = await self.db.fetchone("SELECT * FROM bookmarklet_intake WHERE id = ?", (item_id,))
        if row is None:
            raise KeyError(item_id)
        return IntakeItem.from_row(row)

    async def list(self, owner: str | None = None, *, limit: int = 100) -> list[IntakeItem]:
        if owner is None:
            rows = await self.db.fetchall("SELECT * FROM bookmarklet_intake ORDER BY id DESC LIMIT ?", (limit,))
        else:
            rows = await self.db.fetchall(
                "SELECT * FROM bookmarklet_intake WHERE owner = ? ORDER BY id DESC LIMIT ?", (owner, limit)
            )
        return [IntakeItem.from_row(r) for r in rows]

    async def claim_next(self) -> IntakeItem | None:
        """Mark the oldest queued item as processing and return it (None when the queue is empty)."""
        async with self.db.transaction():
            row = await self.db.fetchone(
                "SELECT * FROM bookmarklet_intake WHERE status = 'queued' ORDER BY id LIMIT 1"
            )
            if row is None:
                return None
            await self.db.execute(
                "UPDATE bookmarklet_intake SET status = 'processing',"
                " updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ?",
                (row["id"],),
            )
        return await self.get(int(row["id"]))

    async def finish(self, item_id: int, *, paper_id: str | None = None, error: str = "") -> None:
        await self.db.execute(
            "UPDATE bookmarklet_intake SET status = ?, paper_id = COALESCE(?, paper_id), error = ?,"
            " updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ?",
            ("error" if error else "done", paper_id, error[:2000], item_id),
        )

    async def requeue_interrupted(self) -> int:
        """Items a dead process left 'processing' go back to the queue at startup (nothing is lost)."""
        return await self.db.execute_rowcount(
            "UPDATE bookmarklet_intake SET status = 'queued' WHERE status = 'processing'"
        )
