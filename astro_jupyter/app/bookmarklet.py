"""Bookmarklet tokens and what the owner's bookmarklet queued (the intake itself: ``intake.py``)."""

from __future__ import annotations

from typing import Any

from ..store.bookmarklet import BookmarkletRepository
from .common import AppBase


class BookmarkletMixin(AppBase):
    @property
    def bookmarklets(self) -> BookmarkletRepository:
        return BookmarkletRepository(self.services.db)

    async def rotate_bookmarklet_token(self, owner: str) -> str:
        return await self.bookmarklets.rotate(owner)

    async def revoke_bookmarklet_token(self, owner: str) -> bool:
        return await self.bookmarklets.revoke(owner)

    async def bookmarklet_status(self, owner: str) -> dict[str, Any] | None:
        return await self.bookmarklets.status(owner)

    async def recent_intake(self, owner: str, limit: int = 10) -> list[dict[str, Any]]:
        """What the owner's bookmarklet queued lately and how each item ended (shown on its page)."""
        return [item.to_dict() for item in await self.bookmarklets.list(owner, limit=limit)]
