"""Cross-session memory with a write gate: only durable, specific, prose facts get in.

A memory is injected into every later system prompt, so a bad one costs on every run.
The gate refuses text that is too short, vague ("something about the stuff"), transient
("right now I am ...") or code-like (code belongs in files), each with the reason, and a
new memory whose word set overlaps an existing one at Jaccard >= ``threshold`` (0.7) is a
duplicate: the existing memory's id is returned instead of writing a second copy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from ..store.memories import MemoryRecord, MemoryRepository

JACCARD_THRESHOLD = 0.7
MIN_CHARS = 20
MIN_WORDS = 4
MAX_CHARS = 1000

_TOKEN = re.compile(r"[a-z0-9]+(?:[.'-][a-z0-9]+)*")
_STOPWORDS = frozenset(
    "a an the of to in on at for and or but is are was were be been it its this that with as by from".split()
)
_VAGUE = frozenset(
    "something somethings stuff things thing somehow whatever etc maybe probably somewhere someone kinda sorta".split()
)
_TRANSIENT = (
    "right now",
    "just now",
    "currently",
    "at the moment",
    "for now",
    "today",
    "tonight",
    "this session",
    "this turn",
    "temporarily",
    "in a minute",
    "i am going to",
    "i'm going to",
    "i will now",
    "next step",
)
_CODE_LINE = re.compile(r"^\s*(def |class |import |from \S+ import |for .+:$|if .+:$|return |#include|```|\$ )", re.M)
_CODE_CHARS = set("{}[]();=<>$\\|`")

Status = Literal["saved", "duplicate", "rejected"]


@dataclass(frozen=True)
class SaveResult:
    status: Status
    reason: str = ""
    memory_id: int | None = None
    similarity: float = 0.0


def tokens(text: str) -> set[str]:
    """Lower-cased word set without stop words: what Jaccard de-duplication compares."""
    return {t for t in _TOKEN.findall(text.lower()) if t not in _STOPWORDS}


def jaccard(a: set[str], b: set[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def quality_problem(content: str) -> str:
    """Why ``content`` may not become a memory, or '' when it may."""
    text = content.strip()
    lowered = text.lower()
    words = re.findall(r"\S+", text)
    if len(text) < MIN_CHARS or len(words) < MIN_WORDS:
        return f"too short: a memory needs at least {MIN_WORDS} words and {MIN_CHARS} characters of specific fact"
    if len(text) > MAX_CHARS:
        return f"too long ({len(text)} characters, at most {MAX_CHARS}): save one concise fact per memory"
    non_space = [c for c in text if not c.isspace()]
    symbol_share = sum(c in _CODE_CHARS for c in non_space) / max(1, len(non_space))
    if _CODE_LINE.search(text) or symbol_share > 0.12:
        return "code-like: memories are prose facts; keep code in files (file_write) instead"
    for phrase in _TRANSIENT:
        if re.search(r"\b" + re.escape(phrase) + r"\b", lowered):
            return f"transient: {phrase!r} describes the current moment, not a durable fact"
    plain = _TOKEN.findall(lowered)
    vague = [w for w in plain if w in _VAGUE]
    if vague and len(vague) / max(1, len(plain)) >= 0.1:
        return f"vague: {', '.join(sorted(set(vague)))!s} — state the specific fact (names, numbers, sources)"
    return ""


class MemoryService:
    """The gate in front of ``agent_memories``; also renders the system-prompt block.

    A run sees the memories of its owner and the ownerless ones; an ownerless run (the kernel,
    the CLI, the shared-token user) sees the ownerless ones only, never a named identity's."""

    def __init__(self, repo: "MemoryRepository", *, threshold: float = JACCARD_THRESHOLD) -> None:
        self.repo = repo
        self.threshold = threshold

    async def save(
        self, content: str, *, category: str = "fact", owner: str = "", session_id: str = "", source: str = "tool"
    ) -> SaveResult:
        problem = quality_problem(content)
        if problem:
            return SaveResult("rejected", problem)
        text = " ".join(content.split())
        new = tokens(text)
        best: tuple[float, "MemoryRecord | None"] = (0.0, None)
        for existing in await self.repo.list(owner=owner):  # "" (an ownerless run): ownerless rows only
            score = jaccard(new, tokens(existing.content))
            if score > best[0]:
                best = (score, existing)
        if best[1] is not None and best[0] >= self.threshold:
            return SaveResult(
                "duplicate",
                f"already remembered as memory {best[1].id} (Jaccard {best[0]:.2f} >= {self.threshold}): {best[1].content}",
                best[1].id,
                best[0],
            )
        memory_id = await self.repo.add(text, category=category, owner=owner, source_session=session_id, source=source)
        return SaveResult("saved", "", memory_id, best[0])

    async def prompt_block(self, *, owner: str = "", limit: int = 50) -> str:
        """The memories section of a system prompt ('' when there are none)."""
        memories = await self.repo.list(owner=owner, limit=limit)  # never every owner's: "" is ownerless
        if not memories:
            return ""
        lines = [f"- [{m.category}] {m.content}" for m in reversed(memories)]
        return "## Memories from earlier sessions\n" + "\n".join(lines)
