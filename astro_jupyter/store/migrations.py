"""Numbered, idempotent migrations: ``store/sql/NNNN_name.sql`` files applied in order.

Each file runs inside one transaction and is recorded in ``schema_version``; the SQL
itself uses ``IF NOT EXISTS`` so a half-recorded run (a killed process) is safe to repeat.
Each table family owns its own file, so features add migrations without editing others.
Numbering: 0001-0009 core, 0010-0019 papers/library, 0020-0029 orchestration, 0030-0039 server.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .db import Database

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def load_migrations() -> list[Migration]:
    found: dict[int, Migration] = {}
    for entry in resources.files("astro_jupyter.store").joinpath("sql").iterdir():
        match = _NAME.match(entry.name)
        if not match:
            continue
        version = int(match.group(1))
        if version in found:
            raise RuntimeError(f"two migrations numbered {version}: {found[version].name} and {match.group(2)}")
        found[version] = Migration(version, match.group(2), entry.read_text(encoding="utf-8"))
    return [found[v] for v in sorted(found)]


async def apply_migrations(db: "Database") -> list[int]:
    """Apply what is missing; returns the versions applied now."""
    await db.execute(
        "CREATE TABLE IF NOT EXISTS schema_version ("
        " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL DEFAULT (datetime('now')))"
    )
    applied = {row["version"] for row in await db.fetchall("SELECT version FROM schema_version")}
    done: list[int] = []
    for migration in load_migrations():
        if migration.version in applied:
            continue
        if "vec0" in migration.sql and not db.info.vec_available:
            continue  # vector tables wait for a driver that can load sqlite-vec
        async with db.transaction():
            for statement in split_statements(migration.sql):
                await db.execute(statement)
            await db.execute(
                "INSERT OR IGNORE INTO schema_version (version, name) VALUES (?, ?)", (migration.version, migration.name)
            )
        done.append(migration.version)
    return done


def split_statements(script: str) -> list[str]:
    """Split on ``;`` at line ends, keeping trigger bodies (BEGIN ... END;) whole."""
    statements: list[str] = []
    buffer: list[str] = []
    depth = 0
    for line in script.splitlines():
        stripped = line.strip()
        if not buffer and (not stripped or stripped.startswith("--")):
            continue
        buffer.append(line)
        upper = stripped.upper()
        if re.search(r"\bBEGIN\s*$", upper):
            depth += 1
        if depth and re.match(r"^END\s*;\s*$", upper):
            depth -= 1
            if depth == 0:
                statements.append("\n".join(buffer))
                buffer = []
            continue
        if depth == 0 and stripped.endswith(";"):
            statements.append("\n".join(buffer))
            buffer = []
    if buffer and "".join(buffer).strip():
        statements.append("\n".join(buffer))
    return statements
