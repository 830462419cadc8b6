"""``object_papers``: an object's bibliography from SIMBAD (over TAP), merged with ADS metadata.

The link from an object to its literature: Sesame gives SIMBAD's main identifier, SIMBAD's
``basic`` / ``has_ref`` / ``ref`` tables give the papers that mention it (newest first), and ADS
adds authors, citation counts and arXiv ids so each paper is ready for ``download_paper``.
SIMBAD's answer is checked row by row (every row must be about the object asked for); without an
ADS token the list keeps SIMBAD's own titles and says so.

Read-only: nothing is stored, and both services are fixed ones (``simbad`` may be re-pointed in
``tap_services``, which the user controls).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ....errors import AstroError, ConfigError, NotFoundError, ServiceError
from ....services.tap import TapError, adql_string
from ..base import AgentTool, ToolContext, ToolOutput

if TYPE_CHECKING:
    from ....config import AstroConfig

DEFAULT_LIMIT = 30
MAX_LIMIT = 200
ADS_BATCH = 50
ADS_FIELDS = "bibcode,title,author,year,pub,doi,identifier,citation_count"


def id_variants(*names: str) -> list[str]:
    """The spellings SIMBAD may store an identifier under: its ``ident.id`` pads the catalogue prefix
    ("M  87", "NGC  1275"), Sesame's answer and the user's text do not."""
    out: dict[str, None] = {}
    for name in names:
        plain = " ".join(str(name).split())
        if not plain:
            continue
        out[plain] = None
        match = re.match(r"^([A-Za-z][A-Za-z+-]*)\s*(\d.*)$", plain)
        if match:
            for pad in (1, 2, 3):
                out[match.group(1) + " " * pad + match.group(2)] = None
    return list(out)[:16]


def simbad_papers_adql(names: list[str], limit: int) -> str:
    """SIMBAD's references of the object any of ``names`` identifies, newest first."""
    wanted = ", ".join(adql_string(n) for n in names)
    return (
        f'SELECT TOP {int(limit)} b.main_id AS main_id, r.bibcode AS bibcode, r.title AS title, r."year" AS pub_year, '
        "r.journal AS journal, r.doi AS doi, h.obj_freq AS obj_freq "
        "FROM ident AS i JOIN basic AS b ON b.oid = i.oidref JOIN has_ref AS h ON h.oidref = b.oid "
        f"JOIN ref AS r ON r.oidbib = h.oidbibref WHERE i.id IN ({wanted}) ORDER BY pub_year DESC"
    )


def _same_id(a: str, b: str) -> bool:
    return " ".join(str(a).split()).casefold() == " ".join(str(b).split()).casefold()


def _plain(value: Any) -> Any:
    import numpy as np

    if value is None or value is np.ma.masked:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.generic):
        return value.item()
    return value


class ObjectPapersTool(AgentTool):
    name = "object_papers"
    description = (
        "The literature about an astronomical object: SIMBAD's references for it (newest first), with ADS metadata "
        "(authors, citations, arXiv id) merged in. Each paper's bibcode works as paper_id for download_paper."
    )
    parameters = {
        "type": "object",
        "properties": {
            "target": {"type": "string", "description": "Object name, e.g. 'NGC 1275', 'M 87'."},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT,
                      "description": f"Most papers (default {DEFAULT_LIMIT})."},
        },
        "required": ["target"],
        "additionalProperties": False,
    }
    is_readonly = True
    defer_loading = True  # found through load_tool: the resident schemas stay small for local models

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        target = str(args.get("target") or "").strip()
        if not target:
            return ToolOutput.error("object_papers needs a 'target', e.g. 'M 87'.")
        limit = args.get("limit", DEFAULT_LIMIT)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            return ToolOutput.error(f"object_papers: 'limit' must be a whole number from 1 to {MAX_LIMIT}.")
        try:
            rec = await ctx.services.sesame.resolve(target)
        except NotFoundError:
            return ToolOutput.error(f"object_papers: {target!r} was not found by CDS Sesame; check the name.",
                                    target=target, not_found=True)
        except ServiceError as exc:
            return ToolOutput.error(f"object_papers: could not resolve {target!r}: {exc}", target=target, reason=exc.reason)
        main_id = rec.main_id
        try:
            adql = simbad_papers_adql(id_variants(main_id, target), limit)
            table = await ctx.services.tap.schema_query("simbad", adql, maxrec=limit)
        except TapError as exc:
            return ToolOutput.error(f"object_papers: SIMBAD failed for {main_id}: {exc}", target=target,
                                    main_id=main_id, reason=exc.reason, service_message=exc.service_message)
        except AstroError as exc:
            return ToolOutput.error(f"object_papers: SIMBAD failed for {main_id}: {exc}", target=target, reason=exc.reason)
        papers: list[dict[str, Any]] = []
        foreign = 0
        for row in table:
            if not _same_id(_plain(row["main_id"]) or "", main_id):
                foreign += 1  # an answer about another object is not this object's bibliography
                continue
            bibcode = str(_plain(row["bibcode"]) or "").strip()
            if not bibcode or any(p["bibcode"] == bibcode for p in papers):
                continue
            papers.append({"bibcode": bibcode, "title": _plain(row["title"]) or "", "year": _plain(row["pub_year"]),
                           "journal": _plain(row["journal"]) or "", "doi": _plain(row["doi"]) or None,
                           "mentions": _plain(row["obj_freq"]), "authors": [], "citation_count": None,
                           "arxiv_id": None, "in_ads": False})
        notes: list[str] = []
        if foreign:
            notes.append(f"{foreign} row(s) of SIMBAD's answer were about another object and were dropped.")
        if papers:
            notes += await self._merge_ads(ctx, papers)
        meta = {"target": target, "main_id": main_id, "papers": papers, "notes": notes, "service": "simbad"}
        if not papers:
            return ToolOutput(f"SIMBAD lists no references for {main_id} (asked: {target}).", metadata=meta)
        lines = [f"{len(papers)} paper(s) about {main_id} (asked: {target}), from SIMBAD, newest first"
                 + (f" (first {limit})" if len(papers) >= limit else "") + ":"]
        for p in papers:
            who = (p["authors"][0] + (" et al." if len(p["authors"]) > 1 else "")) if p["authors"] else ""
            cites = f"; cited {p['citation_count']}" if p["citation_count"] is not None else ""
            arxiv = f"; arXiv:{p['arxiv_id']}" if p["arxiv_id"] else ""
            lines.append(f"- {p['bibcode']} ({p['year'] or '?'}) {p['title'] or '(no title)'}"
                         + (f" — {who}" if who else "") + cites + arxiv)
        lines += [f"Note: {n}" for n in notes]
        lines.append('Next: download_paper(paper_id="<bibcode>") to fetch one into the library.')
        return ToolOutput("\n".join(lines), metadata=meta)

    @staticmethod
    async def _merge_ads(ctx: ToolContext, papers: list[dict[str, Any]]) -> list[str]:
        ads = ctx.services.ads
        if not ads.configured:
            return ["No ADS token (ADS_API_TOKEN): titles are SIMBAD's, without authors or citation counts."]
        by_bib = {p["bibcode"]: p for p in papers}
        try:
            for start in range(0, len(papers), ADS_BATCH):
                batch = [p["bibcode"] for p in papers[start:start + ADS_BATCH]]
                query = "bibcode:(" + " OR ".join('"' + b.replace('"', "") + '"' for b in batch) + ")"
                result = await ads.search(query, rows=len(batch), fl=ADS_FIELDS)
                for record in result.records:
                    paper = by_bib.get(record.bibcode or "")
                    if paper is None:  # ADS answered with a paper we did not ask about: not merged
                        continue
                    paper.update({"title": record.title or paper["title"], "authors": list(record.authors[:20]),
                                  "citation_count": record.citation_count, "arxiv_id": record.arxiv_id,
                                  "doi": record.doi or paper["doi"], "year": record.year or paper["year"],
                                  "journal": record.journal or paper["journal"], "in_ads": True})
        except (ServiceError, ConfigError) as exc:
            return [f"ADS metadata could not be added ({exc}); the list is SIMBAD's."]
        missing = [p["bibcode"] for p in papers if not p["in_ads"]]
        return [f"ADS does not know {len(missing)} of these: {', '.join(missing[:5])}"] if missing else []


def tools(config: "AstroConfig") -> list[AgentTool]:
    return [ObjectPapersTool()]
