"""Full-text search over past sessions (titles, summaries) and their messages (FTS5), fast at any size.

Shared by the ``search_history`` tool and the server's ``GET astro/api/search/history``.
Snippets mark matched terms with ``«`` and ``»`` (plain text, safe to show to the model);
``snippet_to_html`` escapes a snippet and turns the markers into ``<mark>`` for a browser.

User text is never passed to ``MATCH`` raw: FTS5 has its own query syntax (``AND``, ``NEAR``,
``"``, ``*``, column filters) in which ordinary text like ``M31 - halo`` is a syntax error.
``fts_query`` keeps the words (dropping bare AND/OR/NOT), quotes each one, and lets a trailing ``*`` mean a prefix.

Why ranking works in windows: FTS5's ``bm25()`` ranks every match of a query, and before the
first row it counts each word's matches for the IDF, so a word in 30 % of a million messages
costs most of a second however few hits are shown. Walking the matches newest first is nearly
free, so a search ranks (BM25) only a *window* of the newest ``window`` matches, the first
"tier"; "more results" (a cursor) continues through that tier and then the next older ones.
Good hits come first among recent work, and every match is reachable, exactly once, by paging.
The BM25 score is computed here: term counts from FTS5's own ``highlight()`` (its tokenizer
and stemmer decide what matched), document frequencies estimated from the density of each
word's newest matches. Snippets and the session join are computed only for the rows returned.
"""

from __future__ import annotations

import html
import math
import re
import zlib
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidInput
from .db import Database

MARK_START = "«"
MARK_END = "»"
ELLIPSIS = "…"

_OPERATORS = {"AND", "OR", "NOT"}  # FTS5 operators typed by a user are dropped, not searched for
_WORD = re.compile(r"[\w][\w.+-]*\*?", re.UNICODE)
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)  # what FTS5's unicode61 tokenizer counts as a token

# BM25's free parameters, the values FTS5's bm25() uses.
BM25_K1 = 1.2
BM25_B = 0.75
_IDF_FLOOR = 1e-6  # as FTS5: a word in (nearly) every row still counts a little, never negatively

# highlight() marks used only to count matches; control characters, never shown to anyone
_HL_OPEN, _HL_CLOSE = "\x02", "\x03"
_HL_SPAN = re.compile("\x02([^\x02\x03]*)\x03")
_NO_UPPER = 2**63 - 1  # "rowid < this" admits every row
_CURSOR_VERSION = "h1"


class InvalidCursor(InvalidInput):
    """A ``cursor`` that this search did not hand out (malformed, or from another query)."""


def _terms(text: str) -> list[tuple[str, bool]]:
    """The words of ``text`` as (word, is_prefix), FTS5 operators dropped."""
    terms: list[tuple[str, bool]] = []
    for raw in _WORD.findall(text or ""):
        prefix = raw.endswith("*")
        word = raw.rstrip("*").strip(".+-")
        if word and word not in _OPERATORS:
            terms.append((word, prefix))
    return terms


def _quoted(word: str, prefix: bool) -> str:
    return '"' + word.replace('"', '""') + '"' + ("*" if prefix else "")


def fts_query(text: str) -> str:
    """An FTS5 expression matching all words of ``text`` (implicit AND); '' when it has none."""
    return " ".join(_quoted(w, p) for w, p in _terms(text))


def snippet_to_html(snippet: str) -> str:
    """HTML-escape a snippet, then show its «matches» as <mark>matches</mark>."""
    escaped = html.escape(snippet, quote=False)
    return escaped.replace(MARK_START, "<mark>").replace(MARK_END, "</mark>")


@dataclass
class HistoryPage:
    """One page of hits, best first within each tier; ``next_cursor`` fetches the next page (None: no more)."""

    hits: list[dict[str, Any]]
    next_cursor: str | None = None
    window: int = 0


# -- where a source (messages or sessions) stands while paging -------------------------------------
@dataclass(frozen=True)
class _State:
    """Position in one source: the tier of the newest ``window`` matches with rowid < ``before``,
    of which ``skip`` (in rank order) were shown."""

    before: int
    skip: int


_DONE = None  # a source with nothing left


@dataclass(frozen=True)
class _Source:
    """One FTS table and how its filters and hits are read."""

    key: str  # its letter in the cursor
    fts: str
    columns: tuple[int, ...]
    content_max: str  # newest rowid of the content table


_MESSAGES = _Source("m", "agent_messages_fts", (0,), "SELECT max(id) FROM agent_messages")
_SESSIONS = _Source("s", "agent_sessions_fts", (0, 1), "SELECT max(rowid) FROM agent_sessions")


@dataclass(frozen=True)
class _Corpus:
    """What BM25 needs of the whole table: rows, mean tokens per row, newest rowid."""

    rows: int
    mean_tokens: float | None  # None: unknown, the tier's own mean is used
    newest: int


@dataclass
class _Plan:
    """A source with the query's filters resolved into SQL and an optional rowid range."""

    source: _Source
    match: str
    terms: list[tuple[str, bool]]  # (word, is_prefix) as typed
    filter_sql: str | None  # "SELECT rowid ... WHERE rowid IN ({ids}) AND ..." keeping rows that pass
    filter_params: list[Any]
    low: int = 0  # rowids below this cannot pass the filters
    high: int = _NO_UPPER  # nor above this
    empty: bool = False  # the filters exclude everything (e.g. a session without messages)
    idf: list[float] | None = None
    corpus: _Corpus | None = None

    @property
    def words(self) -> list[str]:
        return [w.lower() for w, _ in self.terms]


@dataclass
class _Item:
    rowid: int
    rank: float
    after: _State | None  # the source's position once this item has been shown


@dataclass
class _Fetched:
    start: _State | None
    items: list[_Item] = field(default_factory=list)


class HistorySearch:
    """``search(query, session_id=None, limit=20)`` → hits; ``search_page(...)`` → a page and its cursor.

    Each hit: ``session_id``, ``session_title``, ``message_id`` (None for a title/summary hit),
    ``run_id``, ``role`` ("session" for a title/summary hit), ``snippet`` (with «» markers),
    ``rank`` (negated BM25: lower is better), ``created_at``.
    """

    def __init__(self, db: Database, *, snippet_tokens: int = 16, window: int = 200, scan_limit: int = 20000) -> None:
        self.db = db
        self.snippet_tokens = snippet_tokens
        self.window = max(1, int(window))
        self.scan_limit = max(self.window, int(scan_limit))

    async def search(
        self,
        query: str,
        session_id: str | None = None,
        limit: int = 20,
        *,
        exclude_run_id: str = "",
        owner: str | None = None,
    ) -> list[dict[str, Any]]:
        """The first page's hits (``exclude_run_id`` leaves out one run's messages: the agent's current question)."""
        page = await self.search_page(query, session_id, limit, exclude_run_id=exclude_run_id, owner=owner)
        return page.hits

    async def search_page(
        self,
        query: str,
        session_id: str | None = None,
        limit: int = 20,
        *,
        exclude_run_id: str = "",
        owner: str | None = None,
        cursor: str | None = None,
    ) -> HistoryPage:
        """Up to ``limit`` hits after ``cursor``; ``owner`` keeps the sessions of that owner and unowned ones.

        Raises ``InvalidCursor`` for a cursor this query did not hand out.
        """
        terms = _terms(query)
        if not terms:
            return HistoryPage([], None, self.window)
        match = " ".join(_quoted(w, p) for w, p in terms)
        limit = max(1, min(int(limit), 200))
        digest = _digest(match, session_id)
        states = _parse_cursor(cursor, digest) if cursor else {"m": None, "s": None}
        args = (match, terms, session_id, exclude_run_id, owner, states if cursor else None, limit)
        hits, positions, more = await self.db.read_sync(self._page_sync, *args)  # one hop to the reader thread
        next_cursor = _format_cursor(digest, positions) if more else None
        return HistoryPage(hits, next_cursor, self.window)

    def _page_sync(
        self,
        conn: Any,
        match: str,
        terms: list[tuple[str, bool]],
        session_id: str | None,
        exclude_run_id: str,
        owner: str | None,
        states: dict[str, _State | None] | None,
        limit: int,
    ) -> tuple[list[dict[str, Any]], dict[str, _State | None], bool]:
        plans = [
            self._message_plan(conn, match, terms, session_id, exclude_run_id, owner),
            self._session_plan(conn, match, terms, session_id, owner),
        ]
        fetched: dict[str, _Fetched] = {}
        for plan in plans:
            key = plan.source.key
            if states is not None and states[key] is _DONE:
                fetched[key] = _Fetched(_DONE)
            else:
                fetched[key] = self._fetch_sync(conn, plan, states[key] if states is not None else None, limit + 1)
        chosen, positions, more = _merge(fetched, limit)
        return self._hits(conn, match, chosen), positions, more

    # -- plans: filters become a rowid filter query and, where possible, a rowid range ------------------
    def _message_plan(
        self,
        conn: Any,
        match: str,
        terms: list[tuple[str, bool]],
        session_id: str | None,
        exclude_run_id: str,
        owner: str | None,
    ) -> _Plan:
        clauses: list[str] = []
        params: list[Any] = []
        plan = _Plan(_MESSAGES, match, terms, None, [])
        if session_id:
            sql = "SELECT min(id), max(id) FROM agent_messages WHERE session_id = ?"
            lo, hi = conn.execute(sql, (session_id,)).fetchone()
            if lo is None:
                plan.empty = True
                return plan
            plan.low, plan.high = int(lo), int(hi)
            clauses.append("m.session_id = ?")
            params.append(session_id)
        if exclude_run_id:
            clauses.append("m.run_id != ?")
            params.append(exclude_run_id)
        join = ""
        if owner is not None:
            join = " CROSS JOIN agent_sessions s ON s.id = m.session_id"  # CROSS: m by rowid first, never s by owner
            clauses.append("s.owner IN ('', ?)")
            params.append(owner)
        if clauses:
            where = " AND ".join(clauses)
            plan.filter_sql = f"SELECT m.id FROM agent_messages m{join} WHERE m.id IN ({{ids}}) AND {where}"
            plan.filter_params = params
        return plan

    def _session_plan(
        self, conn: Any, match: str, terms: list[tuple[str, bool]], session_id: str | None, owner: str | None
    ) -> _Plan:
        clauses: list[str] = []
        params: list[Any] = []
        plan = _Plan(_SESSIONS, match, terms, None, [])
        if session_id:
            found = conn.execute("SELECT rowid FROM agent_sessions WHERE id = ?", (session_id,)).fetchone()
            rowid = None if found is None else found[0]
            if rowid is None:
                plan.empty = True
                return plan
            plan.low = plan.high = int(rowid)
        if owner is not None:
            clauses.append("+s.owner IN ('', ?)")  # unary +: look rows up by rowid, never scan the owner index
            params.append(owner)
        if clauses:
            where = " AND ".join(clauses)
            plan.filter_sql = f"SELECT s.rowid FROM agent_sessions s WHERE s.rowid IN ({{ids}}) AND {where}"
            plan.filter_params = params
        return plan

    # -- on the connection's thread: tiers, scores, items --------------------------------------------
    def _fetch_sync(self, conn: Any, plan: _Plan, state: _State | None, want: int) -> _Fetched:
        """Up to ``want`` items from ``state`` on (None: the start), crossing into older tiers as needed."""
        if plan.empty:
            return _Fetched(None)
        before = state.before if state else min(plan.high + 1, _NO_UPPER)
        skip = state.skip if state else 0
        start = state
        out: list[_Item] = []
        scanned = 0
        while True:
            ids, low, more, n = self._tier_sync(conn, plan, before, self.scan_limit - scanned)
            scanned += n
            if start is None:  # pin the first tier: messages written later do not shift the pages
                start = _State(ids[0] + 1 if ids else before, 0)
                before = start.before
            ranked = self._rank_sync(conn, plan, ids, dense=n <= 2 * len(ids)) if ids else []
            for i in range(skip, len(ranked)):
                rowid, rank = ranked[i]
                after = _State(before, i + 1) if i + 1 < len(ranked) else (_State(low, 0) if more else _DONE)
                out.append(_Item(rowid, rank, after))
                if len(out) >= want:
                    return _Fetched(start, out)
            if not more:  # nothing older: the source ends with the last item
                if out:
                    out[-1].after = _DONE
                return _Fetched(start if out else _DONE, out)
            if plan.filter_sql is not None and scanned >= self.scan_limit:
                # the filters skipped most matches: stop; the cursor continues below what was examined
                if out:
                    out[-1].after = _State(low, 0)
                    return _Fetched(start, out)
                return _Fetched(_State(low, 0), [])
            before, skip = low, 0

    def _tier_sync(self, conn: Any, plan: _Plan, before: int, budget: int) -> tuple[list[int], int, bool, int]:
        """The newest ``window`` matches passing the filters with rowid < ``before``.

        Returns (ids newest first, the rowid the next tier starts below, whether older matches may
        remain, matches examined). With filters, at most ``budget`` matches are examined.
        """
        fts = plan.source.fts
        sql = (
            f"SELECT rowid FROM {fts} WHERE {fts} MATCH ? AND rowid < ? AND rowid >= ?"
            " ORDER BY rowid DESC LIMIT ?"
        )
        if plan.filter_sql is None:
            rows = conn.execute(sql, (plan.match, before, plan.low, self.window)).fetchall()
            ids = [int(r[0]) for r in rows]
            full = len(ids) == self.window
            return ids, (ids[-1] if ids else before), full, len(ids)
        kept: list[int] = []
        scanned = 0
        upper = before
        chunk = self.window
        while True:
            take = max(1, min(chunk, budget - scanned))
            rows = conn.execute(sql, (plan.match, upper, plan.low, take)).fetchall()
            ids = [int(r[0]) for r in rows]
            scanned += len(ids)
            if ids:
                marks = ",".join(str(i) for i in ids)
                passing = {int(r[0]) for r in conn.execute(plan.filter_sql.format(ids=marks), plan.filter_params)}
                for rowid in ids:
                    if rowid in passing:
                        kept.append(rowid)
                        if len(kept) == self.window:
                            return kept, rowid, True, scanned
                upper = ids[-1]
            if len(ids) < take:
                return kept, upper, False, scanned  # no older matches at all
            if scanned >= budget:
                return kept, upper, True, scanned
            chunk = min(chunk * 4, self.scan_limit)

    def _rank_sync(self, conn: Any, plan: _Plan, ids: list[int], *, dense: bool) -> list[tuple[int, float]]:
        """(rowid, rank) of ``ids`` best first: BM25 over the tier, ties newest first.

        ``dense``: the ids are (nearly) all the matches in their rowid range, so one range scan
        reads them; a sparse set is read by rowid (FTS5 seeks once per id, slower per row).
        """
        fts = plan.source.fts
        cols = ", ".join(f"highlight({fts}, {c}, ?, ?)" for c in plan.source.columns)
        params: list[Any] = [_HL_OPEN, _HL_CLOSE] * len(plan.source.columns) + [plan.match]
        if dense:
            where, params = "rowid BETWEEN ? AND ?", params + [min(ids), max(ids)]
        else:
            where = "rowid IN (" + ",".join(str(i) for i in ids) + ")"
        wanted = set(ids)
        cursor = conn.execute(f"SELECT rowid, {cols} FROM {fts} WHERE {fts} MATCH ? AND {where}", params)
        rows = [r for r in cursor if int(r[0]) in wanted]
        if plan.corpus is None:
            plan.corpus = _corpus_sync(conn, plan.source)
        if plan.idf is None:
            plan.idf = self._idf_sync(conn, plan, plan.corpus)
        words = plan.words
        counted: list[tuple[int, list[int], int]] = []
        for row in rows:
            text = " ".join(str(v or "") for v in tuple(row)[1:]) if len(row) > 2 else str(row[1] or "")
            tf = [max(1, text.count(_HL_OPEN))] if len(words) == 1 else _term_counts(text, words)
            counted.append((int(row[0]), tf, len(_TOKEN.findall(text))))
        avg = plan.corpus.mean_tokens or ((sum(n for _, _, n in counted) / len(counted)) if counted else 1.0)
        scored = [(rowid, -_bm25(tf, length, avg, plan.idf)) for rowid, tf, length in counted]
        scored.sort(key=lambda item: (item[1], -item[0]))
        return scored

    def _idf_sync(self, conn: Any, plan: _Plan, corpus: _Corpus) -> list[float]:
        """Each word's IDF (as FTS5's bm25), its document frequency counted up to ``window``
        matches and beyond that estimated from the density of its newest ``window`` matches."""
        if len(plan.terms) == 1:
            return [1.0]  # one word: the IDF scales every score alike and cannot change the order
        fts = plan.source.fts
        idf: list[float] = []
        for word, prefix in plan.terms:
            sql = f"SELECT rowid FROM {fts} WHERE {fts} MATCH ? ORDER BY rowid DESC LIMIT ?"
            rows = conn.execute(sql, (_quoted(word, prefix), self.window)).fetchall()
            n = len(rows)
            if n == self.window:
                span = max(1, corpus.newest - int(rows[-1][0]) + 1)
                n = max(n, min(corpus.rows, round(corpus.rows * self.window / span)))
            total = max(corpus.rows, n)
            idf.append(max(_IDF_FLOOR, math.log((total - n + 0.5) / (n + 0.5))))
        return idf

    # -- the rows shown: snippets and the session join, only for them -------------------------------
    def _hits(self, conn: Any, match: str, chosen: list[tuple[str, _Item]]) -> list[dict[str, Any]]:
        by_key: dict[str, dict[int, dict[str, Any]]] = {}
        for key in ("m", "s"):
            ids = [item.rowid for k, item in chosen if k == key]
            if ids:
                by_key[key] = self._details(conn, key, match, ids)
        hits: list[dict[str, Any]] = []
        for key, item in chosen:
            row = by_key.get(key, {}).get(item.rowid)
            if row is None:
                continue  # deleted between ranking and reading
            if key == "m":
                hits.append(_hit(row, item.rank, message_id=row["message_id"], run_id=row["run_id"], role=row["role"]))
            else:
                hits.append(_hit(row, item.rank, message_id=None, run_id="", role="session"))
        return hits

    def _details(self, conn: Any, key: str, match: str, ids: list[int]) -> dict[int, dict[str, Any]]:
        """Snippet, session title and message fields of the rows shown (only these are read)."""
        marks = ",".join(str(int(i)) for i in ids)
        tokens = int(self.snippet_tokens)
        if key == "m":
            sql = (
                "SELECT agent_messages_fts.rowid AS rid, m.id AS message_id, m.session_id, m.run_id, m.role, m.created_at,"
                f" s.title AS session_title, snippet(agent_messages_fts, 0, ?, ?, ?, {tokens}) AS snippet"
                " FROM agent_messages_fts CROSS JOIN agent_messages m ON m.id = agent_messages_fts.rowid"
                " CROSS JOIN agent_sessions s ON s.id = m.session_id"
                f" WHERE agent_messages_fts MATCH ? AND agent_messages_fts.rowid IN ({marks})"
            )
        else:
            sql = (
                "SELECT agent_sessions_fts.rowid AS rid, s.id AS session_id, s.title AS session_title,"
                f" s.updated_at AS created_at, snippet(agent_sessions_fts, -1, ?, ?, ?, {tokens}) AS snippet"
                " FROM agent_sessions_fts CROSS JOIN agent_sessions s ON s.rowid = agent_sessions_fts.rowid"
                f" WHERE agent_sessions_fts MATCH ? AND agent_sessions_fts.rowid IN ({marks})"
            )
        cursor = conn.execute(sql, (MARK_START, MARK_END, ELLIPSIS, match))
        names = [d[0] for d in cursor.description]
        return {int(r[0]): dict(zip(names, tuple(r))) for r in cursor.fetchall()}


# -- pure helpers -------------------------------------------------------------------------------------
def _corpus_sync(conn: Any, source: _Source) -> _Corpus:
    """Row count and mean tokens per row from FTS5's averages record (one small read), else estimates."""
    newest = int(conn.execute(source.content_max).fetchone()[0] or 0)
    row = conn.execute(f"SELECT block FROM {source.fts}_data WHERE id = 1").fetchone()
    numbers = _varints(bytes(row[0])) if row and row[0] is not None else []
    if len(numbers) >= 1 + len(source.columns) and numbers[0] > 0:
        return _Corpus(numbers[0], sum(numbers[1 : 1 + len(source.columns)]) / numbers[0], newest)
    return _Corpus(newest, None, newest)


def _varints(blob: bytes) -> list[int]:
    """SQLite's varints (FTS5 writes its averages record as them): 7 bits a byte, big-endian, 9th byte whole."""
    out: list[int] = []
    i = 0
    while i < len(blob):
        value = 0
        for j in range(9):
            if i >= len(blob):
                return out  # truncated: keep what was whole
            byte = blob[i]
            i += 1
            if j == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        out.append(value)
    return out


def _term_counts(text: str, words: list[str]) -> list[int]:
    """How often each query word matched in ``text`` (highlight()-marked), each mark given to the
    word it shares the longest prefix with (FTS5 matched stems: "galaxies" for "galaxy")."""
    counts = [0] * len(words)
    for span in _HL_SPAN.findall(text):
        found = span.lower()
        best, best_len = 0, -1
        for i, word in enumerate(words):
            shared = len(_common_prefix(found, word))
            if shared > best_len:
                best, best_len = i, shared
        counts[best] += 1
    return [max(1, c) for c in counts]  # every word matched (implicit AND) even when a mark was not attributed


def _common_prefix(a: str, b: str) -> str:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return a[:n]


def _bm25(tf: list[int], length: int, avg: float, idf: list[float]) -> float:
    norm = BM25_K1 * (1 - BM25_B + BM25_B * length / max(avg, 1.0))
    return sum(w * (f * (BM25_K1 + 1)) / (f + norm) for f, w in zip(tf, idf))


def _merge(fetched: dict[str, _Fetched], limit: int) -> tuple[list[tuple[str, _Item]], dict[str, _State | None], bool]:
    """Interleave the sources by rank (each keeps its own order) and take ``limit``.

    Returns the chosen items, each source's position after them, and whether anything remains.
    """
    queues = {key: list(f.items) for key, f in fetched.items()}
    positions: dict[str, _State | None] = {key: f.start for key, f in fetched.items()}
    chosen: list[tuple[str, _Item]] = []
    while len(chosen) < limit:
        heads = [(q[0].rank, key) for key, q in queues.items() if q]
        if not heads:
            break
        _, key = min(heads)
        item = queues[key].pop(0)
        chosen.append((key, item))
        positions[key] = item.after
    more = any(queues.values()) or any(state is not _DONE for state in positions.values())
    return chosen, positions, more


def _digest(match: str, session_id: str | None) -> str:
    return format(zlib.crc32(f"{match}\x00{session_id or ''}".encode("utf-8")), "08x")


def _format_cursor(digest: str, positions: dict[str, _State | None]) -> str:
    def one(state: _State | None) -> str:
        return "x" if state is None else f"{state.before}-{state.skip}"

    return f"{_CURSOR_VERSION}.{digest}.{one(positions.get('m'))}.{one(positions.get('s'))}"


_CURSOR = re.compile(r"^h1\.([0-9a-f]{8})\.(x|\d{1,19}-\d{1,9})\.(x|\d{1,19}-\d{1,9})$")


def _parse_cursor(cursor: str, digest: str) -> dict[str, _State | None]:
    found = _CURSOR.match(cursor.strip())
    if not found:
        raise InvalidCursor("not a history-search cursor (pass back the next_cursor of a previous page unchanged)")
    if found.group(1) != digest:
        raise InvalidCursor(
            "this cursor belongs to a different search (other words or session); search again without it"
        )

    def one(text: str) -> _State | None:
        if text == "x":
            return None
        before, skip = text.split("-")
        return _State(min(int(before), _NO_UPPER), int(skip))

    return {"m": one(found.group(2)), "s": one(found.group(3))}


def _hit(r: dict[str, Any], rank: float, *, message_id: int | None, run_id: str, role: str) -> dict[str, Any]:
    return {
        "session_id": r["session_id"],
        "session_title": r["session_title"],
        "message_id": message_id,
        "run_id": run_id,
        "role": role,
        "snippet": r["snippet"],
        "rank": float(rank),
        "created_at": r["created_at"],
    }
