"""Seed a library for the offline demo (Binder, Docker, a first look): sample papers, a Sesame cache.

``astro-jupyter demo`` runs :func:`seed_demo`; it is idempotent, so running it twice leaves
one copy of everything. Nothing here needs the network or an API key.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from html import escape
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .papers import SAMPLE_PAPERS, SamplePaper

if TYPE_CHECKING:
    from ..cells.display import CatalogQueryResult
    from ..services.container import ServiceContainer

DEMO_SESSION_TITLE = "Demo: what constrains the Milky Way halo mass beyond 100 kpc?"


@dataclass
class DemoSummary:
    paper_ids: list[str] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)
    session_id: str = ""


def demo_paper_id(paper: SamplePaper) -> str:
    """The library id a sample paper always gets, so seeding again finds it instead of adding a copy."""
    return f"local:{paper.slug}"


def write_sample_pdf(paper: SamplePaper, path: Path) -> Path:
    """Typeset one sample paper (title, authors, abstract, numbered sections, references)."""
    import pymupdf

    parts = [f"<h1>{escape(paper.title)}</h1>", f"<p><i>{escape(', '.join(paper.authors))}</i></p>"]
    parts.append(f"<h2>Abstract</h2><p>{escape(paper.abstract)}</p>")
    for heading, body in paper.sections:
        parts.append(f"<h2>{escape(heading)}</h2>")
        parts += [f"<p>{escape(p.strip())}</p>" for p in body.split("\n\n") if p.strip()]
    parts.append("<h2>References</h2>")
    parts += [f"<p>{escape(ref)}</p>" for ref in paper.references]
    css = "h1 {font-size: 18pt;} h2 {font-size: 13pt; margin-top: 10pt;} p {font-size: 10pt; text-align: justify;}"

    story = pymupdf.Story(html="".join(parts), user_css=css)
    writer = pymupdf.DocumentWriter(str(path))
    mediabox = pymupdf.paper_rect("a4")
    where = mediabox + (56, 56, -56, -56)
    more = True
    while more:
        device = writer.begin_page(mediabox)
        more, _ = story.place(where)
        story.draw(device)
        writer.end_page()
    writer.close()

    doc = pymupdf.open(str(path))
    doc.set_metadata(
        {
            "title": paper.title,
            "author": "; ".join(paper.authors),
            "keywords": "astro-jupyter demo sample",
            "creationDate": f"D:{paper.year}0101000000",
        }
    )
    doc.saveIncr()
    doc.close()
    return path


def sample_sesame_files() -> list[tuple[str, str]]:
    """(object name, recorded Sesame XML) pairs bundled with the package."""
    folder = resources.files("astro_jupyter.demo").joinpath("sesame")
    pairs = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".xml"):
            text = entry.read_text(encoding="utf-8")
            pairs.append((_sesame_name(text) or entry.name[:-4], text))
    return pairs


def _sesame_name(xml_text: str) -> str:
    import xml.etree.ElementTree as ET

    return (ET.fromstring(xml_text).findtext("Target/name") or "").strip()


async def seed_demo(services: "ServiceContainer") -> DemoSummary:
    summary = DemoSummary()
    with tempfile.TemporaryDirectory() as tmp:
        for paper in SAMPLE_PAPERS:
            paper_id = demo_paper_id(paper)
            known = await services.library.find(paper_id)
            if known is not None and known.pdf_path and Path(known.pdf_path).is_file():
                summary.paper_ids.append(known.id)  # seeded before (maybe parsed since): left as it is
                continue
            # Typesetting is not byte-stable (the PDF's dates and ids change), so the content hash cannot
            # recognise an earlier seed: the stable id does.
            pdf = write_sample_pdf(paper, Path(tmp) / f"{paper.slug}.pdf")
            record = await services.library.add_pdf(pdf, fetch=False, paper_id=paper_id)
            record = await services.library.update(
                record.id, title=paper.title, authors=list(paper.authors), year=paper.year, abstract=paper.abstract
            )
            summary.paper_ids.append(record.id)
    for name, xml_text in sample_sesame_files():
        target = await services.sesame.prime_cache(name, xml_text)
        summary.targets.append(target.main_id)
    summary.session_id = await _demo_session(services)
    return summary


async def _demo_session(services: "ServiceContainer") -> str:
    """The recorded conversation, shared (ownerless), so history search has something to find on first launch."""
    for session in await services.sessions.list(limit=1000):
        if session.title == DEMO_SESSION_TITLE and not session.owner:
            return session.id
    return await import_demo_session(services, owner="")


def recorded_session() -> dict[str, Any]:
    """The demo's recorded run (``session.json``): its messages and the events the sidebar replays."""
    text = resources.files("astro_jupyter.demo").joinpath("session.json").read_text(encoding="utf-8")
    return json.loads(text)


async def import_demo_session(services: "ServiceContainer", owner: str) -> str:
    """Store the recorded session for ``owner`` (a new session with one finished run, its messages
    and events) so a reopen replays it through the live path; returns the new session's id. Every
    event is checked against ``events.py`` first: a bad recording fails here, not in the sidebar."""
    from ..events import from_wire, to_wire
    from ..store.sessions import new_id

    recorded = recorded_session()
    session = await services.sessions.create(
        title=recorded["title"], owner=owner, source="demo", model=recorded["model"]
    )
    run_id = new_id("run")

    def fill(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace("{session_id}", session.id).replace("{run_id}", run_id)
        return value

    events = [to_wire(from_wire({k: fill(v) for k, v in e.items()})) for e in recorded["events"]]
    await services.runs.create(run_id, session.id, owner=owner, prompt=recorded["prompt"], model=recorded["model"])
    await services.runs.append_events(run_id, list(enumerate(events, start=1)))
    await services.runs.reserve_ids(run_id, len(events))
    await services.runs.finish(run_id, "finished")
    await services.messages.append_many(session.id, recorded["messages"], run_id=run_id)
    return session.id


DEMO_CATALOG = Path(__file__).resolve().parent / "catalogs" / "m87_field.vot"


def demo_catalog() -> "CatalogQueryResult":
    """The demo's shipped VOTable (synthetic stars around M 87) as the object ``%astro query_catalog``
    returns, so the catalog side can be tried offline: ``to_table()``, ``to_pandas()``, ``show_sky()``."""
    from astropy.table import Table

    from ..cells.display import CatalogQueryResult
    from ..services.tap import PREVIEW_ROWS, field_meta, position_columns, preview_rows

    table = Table.read(DEMO_CATALOG, format="votable")
    columns = field_meta(table)
    catalog = {
        "service": "demo (offline)", "service_url": "", "adql": "SELECT source_id, ra, dec, gmag, plx FROM demo "
        "WHERE 1 = CONTAINS(POINT('ICRS', ra, dec), CIRCLE('ICRS', 187.70593, 12.39112, 0.25))",
        "row_count": len(table), "truncated": False, "maxrec": len(table), "mode": "sync", "result_id": "demo",
        "columns": [{k: c[k] for k in ("name", "unit", "ucd", "datatype")} for c in columns],
        "preview": preview_rows(table, PREVIEW_ROWS),
        "position": position_columns(columns),
    }
    text = f"{len(table)} rows (the demo's shipped table); columns: " + ", ".join(c["name"] for c in columns)
    return CatalogQueryResult("query_catalog", None, text, False, {"catalog": catalog, "path": str(DEMO_CATALOG)})
