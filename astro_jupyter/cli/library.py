"""``astro-jupyter library``: bring papers into the library and see what is there.

    astro-jupyter library add FILE.pdf | ARXIV_ID | DOI | BIBCODE | URL  [--download] [--no-fetch] [--json]
    astro-jupyter library list [--state metadata|downloaded|parsed] [--json]
    astro-jupyter library show PAPER_ID [--json]
    astro-jupyter library bib [PAPER_ID ...]   BibTeX of the library (or of these papers) on stdout

A local PDF is copied into ``ASTRO_HOME/papers/`` with metadata read from the PDF itself
(upgraded from arXiv/ADS when the PDF names its arXiv id or DOI); an identifier brings in
the metadata from arXiv/ADS, and ``--download`` fetches the PDF too. Exit 1 with a clear
message on a bad identifier, an unreadable file or a failing service.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from .registry import EXIT_ERROR, EXIT_OK, command, err, json_flag, open_app

if TYPE_CHECKING:
    from ..app import AstroApp
    from ..store.papers import PaperRecord


def _library_args(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="library_command", metavar="ACTION", required=True)
    add = sub.add_parser("add", help="add a local PDF or a paper by arXiv id / DOI / bibcode / URL")
    add.add_argument("source", help="path to a PDF, or an arXiv id, DOI, ADS bibcode or arxiv.org/ADS/doi.org URL")
    add.add_argument("--download", action="store_true", help="also download the PDF (identifiers only)")
    add.add_argument("--no-fetch", action="store_true", help="do not ask arXiv/ADS for metadata (local PDFs)")
    json_flag(add)
    lst = sub.add_parser("list", help="list the papers in the library, newest first")
    lst.add_argument("--state", choices=["metadata", "downloaded", "parsed"], help="only papers in this state")
    lst.add_argument("--limit", type=int, default=1000)
    json_flag(lst)
    show = sub.add_parser("show", help="show one paper's full record")
    show.add_argument("paper_id", help="library id or any identifier of a stored paper")
    json_flag(show)
    bib = sub.add_parser("bib", help="print the library's BibTeX (NASA ADS entries where it knows the paper)")
    bib.add_argument("paper_ids", nargs="*", help="only these papers (library ids or any identifier)")


def _line(paper: "PaperRecord") -> str:
    year = f" ({paper.year})" if paper.year else ""
    return f"{paper.id:<32} {paper.state:<10} {paper.title or '(untitled)'}{year}"


@command("library", "add papers to the local library and list them", _library_args)
async def cmd_library(args: argparse.Namespace) -> int:
    async with open_app() as app:
        if args.library_command == "add":
            return await _add(app, args)
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
        papers = await app.list_paper_records(state=args.state, limit=args.limit)
        if args.json:
            print(json.dumps([p.to_dict() for p in papers], ensure_ascii=False))
            return EXIT_OK
        if not papers:
            print("the library is empty (add a paper with: astro-jupyter library add FILE.pdf|ARXIV_ID|DOI)")
        for paper in papers:
            print(_line(paper))
        return EXIT_OK


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
        added = await app.add_local(args.source, fetch=not args.no_fetch, download=args.download)
    except DownloadFailed as exc:
        err(str(exc))
        return EXIT_ERROR
    paper = added.record
    if args.json:
        print(json.dumps(paper.to_dict(), ensure_ascii=False))
        return EXIT_OK
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
    if paper.state == "metadata":
        print(f"  metadata only; fetch the PDF with: astro-jupyter library add {paper.id} --download")
    return EXIT_OK
