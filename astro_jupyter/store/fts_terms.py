"""SQLite FTS5's own tokenizer (``porter unicode61``, as ``paper_chunks_fts`` uses) outside SQLite, for the
shared library's word → chunk postings (``store/pg_library.py``).

The shared library ranks full text by BM25 over these postings so that it ranks like the SQLite
library: same tokens (FTS5's unicode61 splitting, diacritics removed, its Porter stemmer), same term
frequencies and document lengths, hence the same scores. PostgreSQL's own parser splits differently
(``1.5`` is one token there, ``H-alpha`` three, ``Ångström`` keeps its accents), which is what made the
two libraries disagree on the labelled set. The texts go through an in-memory FTS5 table of the same
driver the SQLite store uses and come back through ``fts5vocab``.
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache
from typing import Any, Sequence

from .db import select_driver

TOKENIZE = "porter unicode61"  # paper_chunks_fts's tokenize= (store/sql/0010_papers.sql)
_PHRASE = re.compile(r'"((?:[^"]|"")*)"')


def available() -> bool:
    """Whether this Python's SQLite has FTS5 (without it the shared library ranks with PostgreSQL's parser)."""
    return select_driver()[1].fts5


class _Tokenizer:
    """One in-memory FTS5 table, emptied for each call (creating the tables costs more than tokenizing a
    question); a lock, since the library calls it from worker threads as well as the event loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conn: Any = None

    def instances(self, texts: Sequence[tuple[str, str]]) -> list[tuple[int, str, int]]:
        with self._lock:
            if self._conn is None:
                conn = select_driver()[0].connect(":memory:", check_same_thread=False)
                conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(text, section, tokenize='{TOKENIZE}')")
                conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
                self._conn = conn
            conn = self._conn
            conn.execute("DELETE FROM t")
            conn.executemany("INSERT INTO t (rowid, text, section) VALUES (?, ?, ?)",
                             [(n, text, section) for n, (text, section) in enumerate(texts, 1)])
            return [(int(d), str(t), int(c)) for d, t, c in
                    conn.execute("SELECT doc, term, count(*) FROM v GROUP BY doc, term ORDER BY doc, term")]


_tokenizer = _Tokenizer()


def _instances(texts: Sequence[tuple[str, str]]) -> list[tuple[int, str, int]]:
    """(row, term, occurrences) for rows of (text, section), rows numbered from 1."""
    return _tokenizer.instances(texts)


def chunk_terms(texts: Sequence[tuple[str, str]]) -> list[tuple[int, dict[str, int]]]:
    """For each (text, section): (its length in tokens, {term: occurrences}) as FTS5 counts them
    (BM25's document length is every token of both columns)."""
    out: list[tuple[int, dict[str, int]]] = [(0, {}) for _ in texts]
    for row, term, count in _instances(texts):
        length, terms = out[row - 1]
        terms[term] = count
        out[row - 1] = (length + count, terms)
    return out


@lru_cache(maxsize=512)
def _query_terms(match: str) -> tuple[str, ...]:
    phrases = [p.replace('""', '"') for p in _PHRASE.findall(match or "")]
    if not phrases:
        return ()
    per_row: dict[int, list[str]] = {}
    for row, term, _count in _instances([(p, "") for p in phrases]):
        per_row.setdefault(row, []).append(term)
    return tuple(term for n in range(1, len(phrases) + 1) for term in per_row.get(n, []))


def query_terms(match: str) -> list[str]:
    """The term of each phrase of a sanitised FTS5 expression (``"a" OR "b"``, from ``rag.fts_query``), in
    order and with repeats: FTS5 scores every phrase, so two words with one stem count twice. A phrase
    that tokenizes to several terms (rare: a word Python's regex keeps whole and FTS5 splits)
    contributes each of them, as if OR-ed."""
    return list(_query_terms(match))
