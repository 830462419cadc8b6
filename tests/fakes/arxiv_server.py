"""A fake arXiv API (``/api/query``) on loopback speaking the Atom wire format.

Entries come from ``tests/data/arxiv/entries.xml``; ``id_list`` matches ids with or without
a version, ``search_query`` understands ``all:``/``ti:``/``au:`` terms joined by AND (plain
words too) against title, summary and authors. ``start``/``max_results`` page the result and
``opensearch:totalResults`` tells the total; ``sortBy=submittedDate|lastUpdatedDate`` sorts. An id_list entry that is not an arXiv id gets
arXiv's error entry (``tests/data/arxiv/error_bad_id.xml``). Words ``cause500`` / ``slowquery``
in the query give HTTP 500 / a sleep of ``state["sleep"]`` seconds. Each request's arrival
time (time.monotonic) is kept in ``state["times"]`` for the rate-limit test.
"""

from __future__ import annotations

import re
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from .base import FakeHandler, FakeServer

DATA = Path(__file__).resolve().parents[1] / "data" / "arxiv"
ATOM = "http://www.w3.org/2005/Atom"
NS = {"atom": ATOM, "arxiv": "http://arxiv.org/schemas/atom", "opensearch": "http://a9.com/-/spec/opensearch/1.1/"}
for _prefix, _uri in NS.items():
    ET.register_namespace("" if _prefix == "atom" else _prefix, _uri)

_ID = re.compile(r"^(\d{4}\.\d{4,5}|[a-z\-]+(?:\.[A-Z]{2})?/\d{7})(v\d+)?$")


def _entries() -> list[ET.Element]:
    return ET.parse(DATA / "entries.xml").getroot().findall("atom:entry", NS)


def _entry_id(entry: ET.Element) -> str:
    raw = (entry.findtext("atom:id", "", NS) or "").rsplit("/abs/", 1)[-1]
    return re.sub(r"v\d+$", "", raw)


def _haystack(entry: ET.Element) -> dict[str, str]:
    title = entry.findtext("atom:title", "", NS).lower()
    summary = entry.findtext("atom:summary", "", NS).lower()
    authors = " ".join(a.findtext("atom:name", "", NS) for a in entry.findall("atom:author", NS)).lower()
    return {"ti": title, "abs": summary, "au": authors, "all": " ".join([title, summary, authors])}


def _feed(entries: list[ET.Element], total: int, start: int, title: str) -> bytes:
    feed = ET.Element(f"{{{ATOM}}}feed")
    ET.SubElement(feed, f"{{{ATOM}}}title").text = f"ArXiv Query: {title}"
    ET.SubElement(feed, f"{{{ATOM}}}id").text = "http://arxiv.org/api/fake"
    ET.SubElement(feed, f"{{{NS['opensearch']}}}totalResults").text = str(total)
    ET.SubElement(feed, f"{{{NS['opensearch']}}}startIndex").text = str(start)
    ET.SubElement(feed, f"{{{NS['opensearch']}}}itemsPerPage").text = str(len(entries))
    feed.extend(entries)
    return b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(feed, encoding="utf-8")


class ArxivHandler(FakeHandler):
    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        arrived = time.monotonic()
        req = self.record()
        with self.fake.lock:
            self.fake.state.setdefault("times", []).append(arrived)
        if req.path != "/api/query":
            self.send_body(404, b"not found", "text/plain")
            return
        search = (req.query.get("search_query") or [""])[0]
        id_list = [i for i in (req.query.get("id_list") or [""])[0].split(",") if i]
        if self.fake.state.get("fail_all") or "cause500" in search:
            self.send_body(500, b"<html><body>Internal Server Error</body></html>", "text/html")
            return
        if "slowquery" in search:
            time.sleep(float(self.fake.state.get("sleep", 2.0)))
        start = int((req.query.get("start") or ["0"])[0])
        max_results = int((req.query.get("max_results") or ["10"])[0])
        entries = _entries()
        if id_list:
            bad = [i for i in id_list if not _ID.match(i)]
            if bad:
                text = (DATA / "error_bad_id.xml").read_text(encoding="utf-8").replace("{bad_id}", bad[0])
                self.send_body(200, text.encode(), "application/atom+xml; charset=utf-8")
                return
            wanted = [re.sub(r"v\d+$", "", i) for i in id_list]
            hits = [e for w in wanted for e in entries if _entry_id(e) == w]
        else:
            terms = re.findall(r"(?:(all|ti|au|abs):)?(\"[^\"]+\"|[^\s()]+)", search)
            conds = [(f or "all", w.strip('"').lower()) for f, w in terms if w.upper() not in {"AND", "OR", "ANDNOT"}]
            hits = [e for e in entries if all(w in _haystack(e).get(f, "") for f, w in conds)]
        if (req.query.get("sortBy") or [""])[0] in ("submittedDate", "lastUpdatedDate"):
            key = "atom:published" if req.query["sortBy"][0] == "submittedDate" else "atom:updated"
            hits.sort(key=lambda e: e.findtext(key, "", NS), reverse=(req.query.get("sortOrder") or ["descending"])[0] == "descending")
        page = hits[start : start + max_results]
        self.send_body(200, _feed(page, len(hits), start, search or ",".join(id_list)), "application/atom+xml; charset=utf-8")


def arxiv_server() -> FakeServer:
    return FakeServer(ArxivHandler)
