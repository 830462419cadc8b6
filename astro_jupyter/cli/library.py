"""``astro-jupyter library``: bring papers into the library and see what is there.

    astro-jupyter library add FILE.pdf | DIR | ARXIV_ID | DOI | BIBCODE | URL  [--download] [--no-fetch] [--no-parse] [--json]
    astro-jupyter library list [--state metadata|downloaded|parsed] [--json]
    astro-jupyter library show PAPER_ID [--json]
    astro-jupyter library remove PAPER_ID [--yes] [--json]
    astro-jupyter library bib [PAPER_ID ...]   BibTeX of the library (or of these papers) on stdout
    astro-jupyter library ingest DIR|LIST|PDF ... [--workers N | --dask-scheduler ADDRESS] [--fetch] [--json]

A local PDF is copied into ``ASTRO_HOME/papers/`` with metadata read from the PDF itself
(upgraded from arXiv/ADS when the PDF names its arXiv id or DOI), then parsed and indexed so
rag_search finds it (progress on stderr; ``--no-parse`` skips that); a folder adds every PDF in
it. An identifier brings in the metadata from arXiv/ADS, and ``--download`` fetches (and parses)
the PDF too. ``ingest`` parses and embeds many PDFs in parallel (processes, or a Dask cluster) and
stores them here as they finish; run it again after an interrupt and it skips what is in. Exit 1 with a clear message on a bad identifier, an unreadable file, a failing
service or a failed parse (the paper then stays in the library, not searchable yet).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .registry import EXIT_ERROR, EXIT_OK, command, err, json_flag, open_app

if TYPE_CHECKING:
    from ..app import AstroApp
    from ..app.ingest import IngestStep
    from ..app.papers import AddedPaper
    from ..store.papers import PaperRecord


def _library_args(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="library_command", metavar="ACTION", required=True)
    add = sub.add_parser("add", help="add a local PDF, every PDF in a folder, or a paper by arXiv id / DOI / bibcode / URL")
    add.add_argument("source", help="path to a PDF or a folder of PDFs, or an arXiv id, DOI, ADS bibcode or arxiv.org/ADS/doi.org URL")
    add.add_argument("--download", action="store_true", help="also download the PDF (identifiers only)")
    add.add_argument("--no-fetch", action="store_true", help="do not ask arXiv/ADS for metadata (local PDFs)")
    add.add_argument("--no-parse", action="store_true", help="do not parse and index the PDF now (it is not searchable until parsed)")
    json_flag(add)
    remove = sub.add_parser("remove", help="take a paper out of the library (its passages, PDF copy and Markdown)")
    remove.add_argument("paper_id", help="library id or any identifier of a stored paper")
    remove.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    json_flag(remove)
    lst = sub.add_parser("list", help="list the papers in the library, newest first")
    lst.add_argument("--state", choices=["metadata", "downloaded", "parsed"], help="only papers in this state")
    lst.add_argument("--limit", type=int, default=1000)
    json_flag(lst)
    show = sub.add_parser("show", help="show one paper's full record")
    show.add_argument("paper_id", help="library id or any identifier of a stored paper")
    json_flag(show)
    ingest = sub.add_parser("ingest", help="parse and embed many PDFs in parallel into the library (resumable)")
    ingest.add_argument("sources", nargs="+", metavar="DIR|LIST|PDF",
                        help="a folder (its PDFs, recursively), a reading list (.txt: one PDF path per line) or PDFs")
    where = ingest.add_mutually_exclusive_group()
    where.add_argument("--workers", type=int, default=1, help="worker processes on this machine (default 1)")
    where.add_argument("--dask-scheduler", metavar="ADDRESS", default="",
                       help="spread the work over this dask.distributed cluster, e.g. tcp://10.0.0.5:8786")
    ingest.add_argument("--fetch", action="store_true",
                        help="ask arXiv/ADS for the metadata of PDFs that print an arXiv id or DOI (one request per paper)")
    json_flag(ingest)
    bib = sub.add_parser("bib", help="print the library's BibTeX (NASA ADS entries where it knows the paper)")
    bib.add_argument("paper_ids", nargs="*", help="only these papers (library ids or any identifier)")


def _line(paper: "PaperRecord") -> str:
    year = f" ({paper.year})" if paper.year else ""
    return f"{paper.id:<32} {paper.state:<10} {paper.title or '(untitled)'}{year}"


@command("library", "add papers to the local library and list them", _library_args)
async def cmd_library(args: argparse.Namespace) -> int:
    async with open_app() as app:
        if args.library_command == "add":
            if Path(args.source).expanduser().is_dir():
                return await _add_folder(app, args)
            return await _add(app, args)
        if args.library_command == "remove":
            return await _remove(app, args)
        if args.library_command == "show":
            paper = await app.paper_record(args.paper_id)
            if args.json:
                print(json.dumps(paper.to_dict(), ensure_ascii=False))
            else:
                from ..agent.tools.astro.metadata import describe_record

                print(describe_record(paper))
            return EXIT_OK
        if args.library_command == "bib":
            return await _bib(app, args)
        if args.library_command == "ingest":
            return await _ingest(app, args)
        papers = await app.list_paper_records(state=args.state, limit=args.limit)
        if args.json:
            print(json.dumps([p.to_dict() for p in papers], ensure_ascii=False))
            return EXIT_OK
        if not papers:
            print("the library is empty (add a paper with: astro-jupyter library add FILE.pdf|ARXIV_ID|DOI)")
        for paper in papers:
            print(_line(paper))
        return EXIT_OK


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _page_progress(label: str) -> Any:
    """Per-page parse progress on stderr (one line rewritten in a terminal, a line per step elsewhere)."""
    tty = sys.stderr.isatty()

    async def report(done: int | None = None, total: int | None = None, message: str = "") -> None:
        text = f"  {label}: {message or f'{done}/{total}'}"
        if tty:
            print("\r" + text[:100].ljust(100), end="", file=sys.stderr, flush=True)
        elif done == total or (done or 0) % 10 == 0:
            print(text, file=sys.stderr, flush=True)

    return report


def _end_progress() -> None:
    if sys.stderr.isatty():
        print("\r" + " " * 100 + "\r", end="", file=sys.stderr, flush=True)


async def _bib(app: "AstroApp", args: argparse.Namespace) -> int:
    """BibTeX on stdout (pipe it to a file), notes on stderr; exit 1 when nothing could be made."""
    result = await app.library_bibtex(args.paper_ids or None)
    for problem in result.problems:
        err(problem)
    if not result.entries:
        if not args.paper_ids:
            err("the library is empty (add a paper with: astro-jupyter library add FILE.pdf|ARXIV_ID|DOI)")
        return EXIT_ERROR
    print(result.text, end="")
    return EXIT_OK


async def _add(app: "AstroApp", args: argparse.Namespace) -> int:
    from ..services.download import DownloadFailed

    try:
        added = await app.add_local(args.source, fetch=not args.no_fetch, download=args.download,
                                    parse=not args.no_parse, progress=None if args.json else _page_progress("parsing"))
    except DownloadFailed as exc:
        err(str(exc))
        return EXIT_ERROR
    finally:
        if not args.json:
            _end_progress()
    if args.json:
        print(json.dumps(_added_json(added), ensure_ascii=False))
        return EXIT_ERROR if added.parse_error else EXIT_OK
    _print_added(added)
    return EXIT_ERROR if added.parse_error else EXIT_OK


def _added_json(added: "AddedPaper") -> dict[str, Any]:
    out = added.record.to_dict()
    out["already"] = added.already
    if added.parsed is not None:
        out["parse"] = {"pages": added.parsed.pages, "chunks": added.parsed.chunks, "embedded": added.parsed.embedded,
                        "embed_error": added.parsed.embed_error}
    if added.parse_error:
        out["parse_error"] = added.parse_error
    return out


def _print_added(added: "AddedPaper") -> None:
    paper = added.record
    if added.already:
        print(f"already in the library ({paper.id}): {_line(paper).split(None, 1)[1]}")
    else:
        print(f"added {_line(paper)}")
    if paper.pdf_path:
        print(f"  PDF: {paper.pdf_path}")
    if paper.source == "local" and paper.metadata.get("fetch_error"):
        print(f"  metadata: kept the PDF's own ({paper.metadata['fetch_error']})")
    for note in added.notes:
        print(f"  {note}")
    if added.parsed is not None:
        p = added.parsed
        embedded = (f"{p.embedded} embedded" if not p.embed_error
                    else f"embedding failed ({p.embed_error}); full-text search works now")
        print(f"  parsed {_count(p.pages, 'page')} into {_count(p.chunks, 'passage')} ({embedded}): searchable with rag_search")
    if added.parse_error:
        err(f"{paper.id} was added but could not be parsed, so it is not searchable: {added.parse_error}")
    elif paper.state == "downloaded":
        print(f"  not searchable until parsed: astro-jupyter tool parse_paper paper_id={paper.id}")
    if paper.state == "metadata":
        print(f"  metadata only; fetch the PDF with: astro-jupyter library add {paper.id} --download")


async def _add_folder(app: "AstroApp", args: argparse.Namespace) -> int:
    async def progress(path: Path, n: int, total: int) -> Any:
        if not args.json:
            print(f"[{n}/{total}] {path.name}", file=sys.stderr, flush=True)
        return None if args.json or args.no_parse else _page_progress("parsing")

    try:
        folder = await app.add_folder(args.source, fetch=not args.no_fetch, parse=not args.no_parse, progress=progress)
    finally:
        if not args.json:
            _end_progress()
    broken = {p.record.id: p.parse_error for p in folder.added if p.parse_error}
    if args.json:
        print(json.dumps({"added": [_added_json(a) for a in folder.added], "failed": folder.failed}, ensure_ascii=False))
    else:
        for added in folder.added:
            _print_added(added)
        new = sum(1 for a in folder.added if not a.already)
        print(f"{new} added, {len(folder.added) - new} already in the library, {len(folder.failed)} failed"
              + (f", {len(broken)} not parsed" if broken else ""))
        for path, why in folder.failed.items():
            err(f"{path}: {why}")
    return EXIT_ERROR if folder.failed or broken else EXIT_OK


async def _remove(app: "AstroApp", args: argparse.Namespace) -> int:
    paper = await app.paper_record(args.paper_id)
    if not args.yes:
        if not sys.stdin.isatty():
            err(f"not removing {paper.id} without confirmation: pass --yes (no terminal to ask on)")
            return EXIT_ERROR
        answer = input(f"Remove {paper.id} ({paper.title or 'untitled'}) and its parsed text from the library? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("kept")
            return EXIT_OK
    removed = await app.remove_paper(paper.id)
    if args.json:
        print(json.dumps({"removed": removed.record.id, "chunks": removed.chunks}, ensure_ascii=False))
    else:
        print(f"removed {removed.record.id} ({removed.record.title or 'untitled'}) and its {_count(removed.chunks, 'passage')}")
    return EXIT_OK


async def _ingest(app: "AstroApp", args: argparse.Namespace) -> int:
    """Progress on stderr, one line a paper; the failures listed at the end; exit 1 when any failed."""
    stored = [0]

    async def progress(step: "IngestStep") -> None:
        stored[0] += step.kind == "ingested"
        if args.json:
            return
        what = {"ingested": f"{step.paper_id}: {step.detail}", "skipped": step.detail, "failed": f"FAILED: {step.detail}"}
        print(f"[{step.done}/{step.total}] {Path(step.path).name}: {what[step.kind]}", file=sys.stderr, flush=True)

    try:
        report = await app.ingest(args.sources, workers=args.workers, scheduler=args.dask_scheduler,
                                  fetch=args.fetch, progress=progress)
    except asyncio.CancelledError:  # Ctrl-C: the paper being stored was finished, nothing is half-written
        err(f"interrupted after {_count(stored[0], 'paper')} ingested; run the same command again to go on "
            "(papers already in are skipped)")
        raise
    if args.json:
        print(json.dumps({
            "total": report.total, "workers": report.workers, "seconds": round(report.seconds, 3),
            "ingested": [{"path": s.path, "paper_id": s.paper_id, "chunks": s.chunks} for s in report.ingested],
            "skipped": [s.path for s in report.skipped],
            "failed": {s.path: s.detail for s in report.failed},
        }, ensure_ascii=False))
    else:
        rate = len(report.ingested) / report.seconds if report.seconds > 0 else 0.0
        print(f"{_count(len(report.ingested), 'paper')} ingested, {len(report.skipped)} already in the library, "
              f"{len(report.failed)} failed, of {report.total} ({report.workers or 'nothing to do'}; "
              f"{report.seconds:.1f} s, {rate:.2f} papers/s)")
        for step in report.failed:
            err(f"{step.path}: {step.detail}")
    return EXIT_ERROR if report.failed else EXIT_OK
