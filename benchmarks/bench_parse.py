"""PDF → Markdown: our parser vs pymupdf4llm ``to_markdown`` vs pypdf plain text, same PDFs.

Run: ``python benchmarks/bench_parse.py [--repeat 5] [--no-pymupdf4llm]`` from the checkout.
PDFs: ../shared/data/pdfs/*.pdf (when present), real manuals Debian ships with outlines (when
installed: libtasn1-doc, nettle-dev, libcfitsio-dev; the gzipped ones are unpacked to a temporary
directory) and tests/data/pdfs/{two_column,many_pages,aas_style}.pdf.

Columns: pages/s (best of ``--repeat`` runs for the fast parsers, one run for pymupdf4llm)
and outline recall — the share of the PDF's own outline (``doc.get_toc()``) entries found
among the Markdown headings (numbering and case ignored). Our parser never reads the outline.
Goal: ≥ 90 % recall on every PDF with an outline, at ≥ 70 % of PyMuPDF's raw ``get_text()``
rate (column "share": our rate as a share of the raw rate, per PDF and over all pages).
Also shown: ``get_text("dict")``, the extraction the parser used to build on.
"""

from __future__ import annotations

import argparse
import gzip
import re
import shutil
import tempfile
import sys
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pymupdf  # noqa: E402

from astro_jupyter.services.parse.document import normalise_heading  # noqa: E402
from astro_jupyter.services.parse.pdf import parse_pdf  # noqa: E402


# real manuals with outlines that no one here wrote, as Debian installs them
DEBIAN_MANUALS = (
    Path("/usr/share/doc/libtasn1-doc/libtasn1.pdf"),
    Path("/usr/share/doc/nettle-dev/nettle.pdf.gz"),
    Path("/usr/share/doc/libcfitsio-dev/quick.pdf.gz"),
)


def debian_manuals(tmp: Path) -> list[Path]:
    """The installed ones; a ``.pdf.gz`` is unpacked into ``tmp`` (PyMuPDF reads plain PDFs)."""
    found = []
    for path in DEBIAN_MANUALS:
        if not path.is_file():
            continue
        if path.suffix == ".gz":
            plain = tmp / path.stem
            with gzip.open(path, "rb") as src, plain.open("wb") as dst:
                shutil.copyfileobj(src, dst)
            path = plain
        found.append(path)
    return found


def pdfs(tmp: Path) -> list[Path]:
    # ../shared/data/pdfs beside the project, found from a git worktree nested deeper as well
    shared = next((p / "shared" / "data" / "pdfs" for p in ROOT.parents if (p / "shared" / "data" / "pdfs").is_dir()), None)
    found = sorted(shared.glob("*.pdf")) if shared is not None else []
    generated = ROOT / "tests" / "data" / "pdfs"
    return found + debian_manuals(tmp) + [generated / n for n in ("two_column.pdf", "many_pages.pdf", "aas_style.pdf")]


CLOCK = time.perf_counter


def best_time(fn: Callable[[], object], repeat: int) -> tuple[float, object]:
    """Best of ``repeat`` runs on ``CLOCK`` (wall by default; ``--cpu``: this process's CPU time)."""
    best, result = float("inf"), None
    for _ in range(repeat):
        t = CLOCK()
        result = fn()
        best = min(best, CLOCK() - t)
    return best, result


def md_headings(md: str) -> list[str]:
    out = []
    for line in md.splitlines():
        if line.startswith("#"):
            text = re.sub(r"[*_`]+", "", line.lstrip("#")).strip()
            out.append(text)
    return out


def recall(toc: list[list], headings: list[str]) -> float | None:
    if not toc:
        return None
    ours = {normalise_heading(h) for h in headings}
    return sum(1 for _, title, _ in toc if normalise_heading(title) in ours) / len(toc)


UNLISTED = {"abstract", "contents", "table of contents", "references", "bibliography", "acknowledgements",
            "acknowledgments", "index"}


def precision(toc: list[list], md: str) -> tuple[float, list[str]] | None:
    """Share of our headings (the title aside) that are outline entries or headings outlines omit."""
    if not toc:
        return None
    outline = {normalise_heading(t) for _, t, _ in toc} | UNLISTED
    heads = [h for line in md.splitlines() if line.startswith("##") for h in md_headings(line)]
    wrong = [h for h in heads if normalise_heading(h) not in outline]
    return 1 - len(wrong) / max(1, len(heads) + 1), wrong


def ours(path: Path) -> str:
    return parse_pdf(path).to_markdown()


def raw_text(path: Path) -> str:
    with pymupdf.open(str(path)) as doc:
        return "\n".join(page.get_text() for page in doc)


def raw_dict(path: Path) -> int:
    """The floor: PyMuPDF's ``dict`` extraction with the flags the parser passes (no images,
    ligatures expanded, clipped to the page), opening the file each time as the parser does."""
    flags = (pymupdf.TEXTFLAGS_DICT & ~pymupdf.TEXT_PRESERVE_IMAGES & ~pymupdf.TEXT_PRESERVE_LIGATURES) | pymupdf.TEXT_MEDIABOX_CLIP
    with pymupdf.open(str(path)) as doc:
        return sum(len(page.get_text("dict", flags=flags)["blocks"]) for page in doc)


def pypdf_text(path: Path) -> str | None:
    try:
        from pypdf import PdfReader
    except ImportError:
        return None

    return "\n".join(page.extract_text() or "" for page in PdfReader(str(path)).pages)


def p4llm(path: Path) -> str | None:
    try:
        import pymupdf4llm
    except ImportError:
        return None
    return pymupdf4llm.to_markdown(str(path), show_progress=False)


def fmt_rate(pages: int, secs: float | None) -> str:
    return "n/a" if secs is None else f"{pages / secs:8.1f}"


def fmt_recall(value: float | None, toc: list) -> str:
    return "   -   " if value is None else f"{value * 100:5.1f}% ({round(value * len(toc))}/{len(toc)})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-pymupdf4llm", action="store_true", help="skip the slow pymupdf4llm column")
    ap.add_argument("--cpu", action="store_true", help="process CPU time instead of wall time (a shared, loaded machine)")
    args = ap.parse_args()
    global CLOCK
    if args.cpu:
        CLOCK = time.process_time
    import logging

    logging.disable(logging.WARNING)
    import os

    clock = "process CPU time" if args.cpu else "wall time"
    print(f"pymupdf {pymupdf.VersionBind}; best of {args.repeat} runs (pymupdf4llm: 1 run); {clock}; load average {os.getloadavg()[0]:.1f}\n")
    header = f"{'PDF':<18}{'pages':>6} | {'ours p/s':>9} {'share':>6} {'ours recall':>16} | {'p4llm p/s':>9} {'p4llm recall':>16} | {'pypdf p/s':>9} | {'raw text':>9} {'raw dict':>9}"
    print(header)
    print("-" * len(header))
    total_pages = 0
    total_ours = 0.0
    total_raw = 0.0
    precisions: list[str] = []
    tmp = Path(tempfile.mkdtemp(prefix="bench_parse_"))
    for path in pdfs(tmp):
        with pymupdf.open(str(path)) as doc:
            pages, toc = doc.page_count, doc.get_toc()
        ours(path)  # warm caches (fonts, imports)
        # ours and the raw floor alternate, so that a change in the machine's load hits both alike
        t_ours = t_raw = float("inf")
        for _ in range(args.repeat):
            once, md = best_time(lambda: ours(path), 1)
            t_ours = min(t_ours, once)
            t_raw = min(t_raw, best_time(lambda: raw_text(path), 1)[0])
        total_pages += pages
        total_ours += t_ours
        total_raw += t_raw
        t_dict, _ = best_time(lambda: raw_dict(path), args.repeat)
        t_pypdf, text = best_time(lambda: pypdf_text(path), 1)
        if text is None:
            t_pypdf = None  # pypdf not installed
        t_p4, md4 = (None, None) if args.no_pymupdf4llm else best_time(lambda: p4llm(path), 1)
        if md4 is None:
            t_p4 = None
        r_ours = recall(toc, md_headings(md))  # type: ignore[arg-type]
        prec = precision(toc, md)  # type: ignore[arg-type]
        if prec is not None:
            precisions.append(f"{path.name:<18} heading precision vs outline {prec[0] * 100:5.1f}%"
                              + (f"  not in the outline: {prec[1][:5]}" if prec[1] else ""))
        r_p4 = recall(toc, md_headings(md4)) if md4 is not None else None
        print(
            f"{path.name:<18}{pages:>6} | {fmt_rate(pages, t_ours):>9} {t_raw / t_ours * 100:5.0f}% {fmt_recall(r_ours, toc):>16} | "
            f"{fmt_rate(pages, t_p4):>9} {fmt_recall(r_p4, toc) if md4 is not None else 'n/a':>16} | "
            f"{fmt_rate(pages, t_pypdf):>9} | {fmt_rate(pages, t_raw):>9} {fmt_rate(pages, t_dict):>9}"
        )
    print("-" * len(header))
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"{'all':<18}{total_pages:>6} | {total_pages / total_ours:9.1f} {total_raw / total_ours * 100:5.0f}%"
          f"   (share: our rate / raw get_text rate; goal ≥ 70 %)")
    print("\n" + "\n".join(precisions))


if __name__ == "__main__":
    main()
