"""Per-session memory of what ``read_file`` returned, so an unchanged re-read costs one line."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FileReadRecord:
    mtime_ns: int
    offset: int
    limit: int | None


class FileStateCache:
    def __init__(self) -> None:
        self._records: dict[str, FileReadRecord] = {}

    def unchanged(self, path: str, mtime_ns: int, offset: int, limit: int | None) -> bool:
        return self._records.get(path) == FileReadRecord(mtime_ns, offset, limit)

    def remember(self, path: str, mtime_ns: int, offset: int, limit: int | None) -> None:
        self._records[path] = FileReadRecord(mtime_ns, offset, limit)

    def forget(self, path: str) -> None:
        self._records.pop(path, None)

    def recent_paths(self, n: int) -> list[str]:
        """Most recently read paths last-in-first (used to restore files after compaction)."""
        return list(self._records)[-n:][::-1]

    def clear(self) -> None:
        self._records.clear()
