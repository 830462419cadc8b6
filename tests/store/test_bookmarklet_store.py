"""Bookmarklet tokens (hashed, rotated, revoked) and the intake queue (claim, finish, re-queue)."""

from __future__ import annotations

import pytest

from astro_jupyter.store.bookmarklet import BookmarkletRepository, hash_token


@pytest.mark.asyncio
async def test_tokens_are_stored_hashed_and_rotation_revokes(services) -> None:
    repo = BookmarkletRepository(services.db)
    assert await repo.status("alice") is None
    first = await repo.rotate("alice")
    stored = await services.db.fetchall("SELECT * FROM bookmarklet_tokens")
    assert [r["token_hash"] for r in stored] == [hash_token(first)]
    assert first not in str(stored)  # the token itself is never stored
    assert await repo.owner_for(first) == "alice"
    assert (await repo.status("alice"))["last_used_at"]

    second = await repo.rotate("alice")
    assert second != first
    assert await repo.owner_for(first) is None and await repo.owner_for(second) == "alice"
    bob = await repo.rotate("bob")
    assert await repo.owner_for(bob) == "bob" and await repo.owner_for(second) == "alice"

    assert await repo.revoke("alice") is True
    assert await repo.owner_for(second) is None and await repo.revoke("alice") is False
    assert await repo.owner_for("") is None


@pytest.mark.asyncio
async def test_queue_claims_in_order_and_requeues_interrupted_items(services) -> None:
    repo = BookmarkletRepository(services.db)
    a = await repo.enqueue("alice", "arxiv:2301.01234", "arxiv", page_url="https://arxiv.org/abs/2301.01234")
    b = await repo.enqueue("alice", "doi:10.1/x", "doi")
    assert a.status == "queued" and a.id < b.id

    claimed = await repo.claim_next()
    assert claimed is not None and claimed.id == a.id and claimed.status == "processing"
    # the server dies here; the next start puts the item back
    assert await repo.requeue_interrupted() == 1
    again = await repo.claim_next()
    assert again.id == a.id
    await repo.finish(a.id, paper_id="arxiv:2301.01234")
    nxt = await repo.claim_next()
    assert nxt.id == b.id
    await repo.finish(b.id, error="arXiv said no")
    assert await repo.claim_next() is None
    done = {i.id: i for i in await repo.list("alice")}
    assert done[a.id].status == "done" and done[a.id].paper_id == "arxiv:2301.01234"
    assert done[b.id].status == "error" and done[b.id].error == "arXiv said no"
    assert await repo.list("bob") == []
