"""A fake NASA ADS API on loopback: ``/search/query`` and ``/resolver/{bibcode}/esource``.

Serves the documents in ``tests/data/ads/corpus.json`` the way ADS does: Bearer token
required (401 otherwise), only the ``fl`` fields returned, ``rows``/``start`` paging, ``sort`` by citation_count or date,
``references(bibcode:X)`` / ``citations(bibcode:X)`` operators, field queries on
``bibcode`` (one, or several as ``bibcode:("A" OR "B")``), ``doi`` and ``identifier``, and plain words matched against title+abstract.

Queries containing these words trigger failures: ``cause500`` → HTTP 500, ``ratelimit`` →
429 with X-RateLimit headers, ``slowquery`` → sleeps ``state["sleep"]`` seconds (a timeout).
``state["fail_all"] = 500`` makes every search fail. ``state["nearest"] = bibcode`` makes a field
query that matches nothing answer with that document instead, as a relevance search returning
its nearest hit does (an unrelated paper). ``state["esource"][bibcode]`` lists the
link-resolver records (dicts with url and link_type).

``POST /export/bibtex`` with ``{"bibcode": [...]}`` answers as the ADS export service does:
``{"msg": "Retrieved N abstracts, starting with number 1.", "export": "@ARTICLE{bibcode, ...}"}``
with one entry per known bibcode (unknown ones left out; none known → 404 ``no result from
solr``). ``state["export_429"] = n`` answers the next n exports with 429 (``Retry-After`` =
``state["retry_after"]``, default "0.2", ``X-RateLimit-Remaining: 0``); ``state["export_remaining"]
= (remaining, reset_epoch)`` puts those quota headers on successful answers;
``state["export_malformed"] = "no_export" | "garbage"`` breaks the answer;
``state["export_swap"] = {asked: served}`` answers for another bibcode instead.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from .base import FakeHandler, FakeServer

DATA = Path(__file__).resolve().parents[1] / "data" / "ads"
TOKEN = "test-ads-token"


def load_corpus() -> dict[str, Any]:
    return json.loads((DATA / "corpus.json").read_text(encoding="utf-8"))


def _matches(doc: dict[str, Any], words: list[str]) -> bool:
    hay = " ".join([" ".join(doc.get("title") or []), doc.get("abstract") or ""]).lower()
    return all(w in hay for w in words)


_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")


def _author(name: str) -> str:
    last, _, first = name.partition(",")
    return f"{{{last.strip()}}}, {first.strip()}" if first else f"{{{last.strip()}}}"


def bibtex_entry(doc: dict[str, Any]) -> str:
    """One document as the ADS export writes it (key = bibcode, aligned fields, ``adsurl``)."""
    kind = "ARTICLE" if doc.get("pub") else "MISC"
    fields: list[tuple[str, str]] = [
        ("author", "{" + " and ".join(_author(a) for a in doc.get("author") or []) + "}"),
        ("title", '"{' + (doc.get("title") or [""])[0] + '}"'),
        ("journal", "{" + (doc.get("pub") or "") + "}"),
        ("keywords", "{" + ", ".join(doc.get("keyword") or []) + "}"),
        ("year", str(doc.get("year") or "")),
    ]
    month = (doc.get("pubdate") or "")[5:7]
    if month.isdigit() and 1 <= int(month) <= 12:
        fields.append(("month", _MONTHS[int(month) - 1]))
    eprint = next((i[6:] for i in doc.get("identifier") or [] if i.lower().startswith("arxiv:")), "")
    if doc.get("doi"):
        fields.append(("doi", "{" + doc["doi"][0] + "}"))
    if eprint:
        fields += [("archivePrefix", "{arXiv}"), ("eprint", "{" + eprint + "}")]
    fields += [
        ("adsurl", "{https://ui.adsabs.harvard.edu/abs/" + doc["bibcode"] + "}"),
        ("adsnote", "{Provided by the SAO/NASA Astrophysics Data System}"),
    ]
    body = ",\n".join(f"{k:>13} = {v}" for k, v in fields if v not in ("{}", '"{}"', ""))
    return f"@{kind}{{{doc['bibcode']},\n{body}\n}}\n\n"


class AdsHandler(FakeHandler):
    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        req = self.record()
        if req.headers.get("Authorization") != f"Bearer {self.fake.state.get('token', TOKEN)}":
            self.send_json(401, {"error": "Unauthorized"})
            return
        if req.path != "/export/bibtex":
            self.send_json(404, {"error": "no such endpoint"})
            return
        state = self.fake.state
        with self.fake.lock:
            limited = int(state.get("export_429") or 0)
            if limited:
                state["export_429"] = limited - 1
        if limited:
            self.send_json(429, {"error": "Too many requests"}, {
                "Retry-After": str(state.get("retry_after", "0.2")), "X-RateLimit-Limit": "100",
                "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(time.time()) + 1)})
            return
        try:
            asked = req.json()["bibcode"]
            assert isinstance(asked, list) and all(isinstance(b, str) for b in asked)
        except (ValueError, KeyError, TypeError, AssertionError):
            self.send_json(400, {"error": "no bibcodes found in payload (parameter name is `bibcode`)"})
            return
        malformed = state.get("export_malformed")
        if malformed == "no_export":
            self.send_json(200, {"msg": "Retrieved 1 abstracts, starting with number 1."})
            return
        if malformed == "garbage":
            self.send_json(200, {"msg": "Retrieved 1 abstracts", "export": "<html>upstream proxy error</html>"})
            return
        by_bib = {d["bibcode"]: d for d in load_corpus()["docs"]}
        swap = state.get("export_swap") or {}
        hits = [by_bib[swap.get(b, b)] for b in asked if swap.get(b, b) in by_bib]
        if not hits:
            self.send_json(404, {"error": "no result from solr"})
            return
        headers = {}
        if state.get("export_remaining"):
            remaining, reset = state["export_remaining"]
            headers = {"X-RateLimit-Limit": "100", "X-RateLimit-Remaining": str(remaining), "X-RateLimit-Reset": str(reset)}
        self.send_json(200, {"msg": f"Retrieved {len(hits)} abstracts, starting with number 1.",
                             "export": "".join(bibtex_entry(d) for d in hits)}, headers)

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        req = self.record()
        if req.headers.get("Authorization") != f"Bearer {self.fake.state.get('token', TOKEN)}":
            self.send_json(401, {"error": "Unauthorized"})
            return
        if req.path.startswith("/resolver/"):
            self._resolver(req.path)
            return
        if req.path != "/search/query":
            self.send_json(404, {"error": "no such endpoint"})
            return
        q = (req.query.get("q") or [""])[0]
        if self.fake.state.get("fail_all"):
            self.send_json(int(self.fake.state["fail_all"]), {"error": "Internal Server Error"})
            return
        if "cause500" in q:
            self.send_json(500, {"error": "Internal Server Error"})
            return
        if "ratelimit" in q:
            self.send_json(429, {"error": "Too many requests"}, {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1767225600"})
            return
        if "slowquery" in q:
            time.sleep(float(self.fake.state.get("sleep", 2.0)))
        self._search(req.query, q)

    def _resolver(self, path: str) -> None:
        match = re.match(r"^/resolver/([^/]+)/esource$", path)
        bibcode = unquote(match.group(1)) if match else ""
        records = (self.fake.state.get("esource") or {}).get(bibcode)
        if not records:
            self.send_json(404, {"error": f"did not find any records for {bibcode}"})
            return
        self.send_json(
            200,
            {"action": "display", "service": "", "links": {"count": len(records), "bibcode": bibcode, "records": records}},
        )

    def _search(self, query: dict[str, list[str]], q: str) -> None:
        corpus = load_corpus()
        docs: list[dict[str, Any]] = corpus["docs"]
        by_bib = {d["bibcode"]: d for d in docs}
        op = re.match(r"^(references|citations)\(bibcode:([^)]+)\)$", q.strip())
        field = re.match(r'^(bibcode|doi|identifier):"?([^"]+)"?$', q.strip())
        several = re.match(r'^bibcode:\((.*)\)$', q.strip())  # bibcode:("A" OR "B"), as ADS reads it
        if several:
            wanted = [b.strip().strip('"') for b in re.split(r"\s+OR\s+", several.group(1))]
            hits = [by_bib[b] for b in wanted if b in by_bib]
        elif op:
            hits = [by_bib[b] for b in corpus[op.group(1)].get(op.group(2), []) if b in by_bib]
        elif field:
            name, value = field.group(1), field.group(2)
            if name == "bibcode":
                hits = [d for d in docs if d["bibcode"] == value]
            elif name == "doi":
                hits = [d for d in docs if value.lower() in [x.lower() for x in d.get("doi") or []]]
            else:
                hits = [d for d in docs if value.lower() in [x.lower() for x in d.get("identifier") or []]]
            if not hits and self.fake.state.get("nearest") in by_bib:
                hits = [by_bib[self.fake.state["nearest"]]]
        else:
            words = [w.lower() for w in re.findall(r"[\w.-]+", q) if w.lower() not in {"and", "or"}]
            hits = [d for d in docs if _matches(d, words)]
        sort = (query.get("sort") or [""])[0]
        if sort.startswith("citation_count"):
            hits = sorted(hits, key=lambda d: -(d.get("citation_count") or 0))
        elif sort.startswith("date"):
            hits = sorted(hits, key=lambda d: d.get("pubdate") or d.get("year") or "", reverse=True)
        rows = int((query.get("rows") or ["10"])[0])
        start = int((query.get("start") or ["0"])[0])
        fl = [f for f in (query.get("fl") or ["bibcode"])[0].split(",") if f]
        page = [{k: d[k] for k in fl if k in d} for d in hits[start : start + rows]]
        self.send_json(
            200,
            {
                "responseHeader": {"status": 0, "QTime": 3, "params": {"q": q, "fl": ",".join(fl), "rows": str(rows)}},
                "response": {"numFound": len(hits), "start": start, "docs": page},
            },
        )


def ads_server() -> FakeServer:
    return FakeServer(AdsHandler)
