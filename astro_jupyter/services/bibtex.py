"""BibTeX for library papers: ADS's own entries where ADS knows the paper, local ones otherwise.

ADS writes the best BibTeX there is (journal macros, LaTeX-encoded names), keyed by bibcode,
so a paper with a bibcode is asked for through the export service. Its answer is not trusted
blindly: every entry is parsed (``bibtexparser``) and kept only when it is the record asked for
(its key or ``adsurl`` names a requested bibcode, and its DOI, when both have one, agrees).
A paper ADS cannot give (arXiv-only, no token, an unknown bibcode, a failed or malformed
answer) gets a local ``@misc``/``@article`` built from the stored metadata; why is said in
``BibResult.problems``.

Keys: the bibcode when there is one (what ADS uses), else ``arXiv:<id>``, else the library id
with the characters BibTeX keys cannot hold replaced. Metadata text is untrusted (it came from
a service or a PDF): braces are dropped before LaTeX encoding, so no value can close its field.

``cited_identifiers`` finds the papers a text cites (bibcodes, ``arXiv:`` ids, DOIs), which is
how a session's answers name papers (the system prompt asks for bibcodes or arXiv ids).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable

from ..errors import AstroError

if TYPE_CHECKING:
    from ..store.papers import PaperRecord
    from .ads import AdsClient
    from .library import LibraryService

_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9_:.&+/-]+")
_BIBCODE_IN_TEXT = re.compile(r"(?<![\w.&])(\d{4}[A-Za-z&][A-Za-z0-9&.]{13}[A-Za-z.])(?![\w&])")
_ARXIV_IN_TEXT = re.compile(r"\barXiv:\s?((?:\d{4}\.\d{4,5})|(?:[a-z][a-z\-]*(?:\.[A-Z]{2})?/\d{7}))(?:v\d+)?", re.IGNORECASE)
_DOI_IN_TEXT = re.compile(r"\b(10\.\d{4,9}/[^\s\"<>\[\]{}|\\^`]+)")


@dataclass(frozen=True)
class BibEntry:
    key: str
    paper_id: str
    text: str  # one entry, BibTeX, ending in a newline
    source: str  # "ads" | "local"


@dataclass
class BibResult:
    entries: list[BibEntry] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    cited: dict[str, str] = field(default_factory=dict)  # identifier as a text cited it → key

    @property
    def text(self) -> str:
        return "\n".join(e.text for e in self.entries)

    def keys(self) -> dict[str, str]:
        """paper id → BibTeX key."""
        return {e.paper_id: e.key for e in self.entries}


def _citations(text: str) -> list[tuple[int, int, str]]:
    """(start, end, identifier) of every paper identifier in a text, in order; overlaps dropped."""
    spans = [(m.start(1), m.end(1), m.group(1)) for m in _BIBCODE_IN_TEXT.finditer(text)]
    spans += [(m.start(), m.end(), f"arXiv:{m.group(1)}") for m in _ARXIV_IN_TEXT.finditer(text)]
    for m in _DOI_IN_TEXT.finditer(text):
        doi = m.group(1).rstrip(".,;:)")
        spans.append((m.start(1), m.start(1) + len(doi), doi))
    out: list[tuple[int, int, str]] = []
    for span in sorted(spans):
        if not out or span[0] >= out[-1][1]:
            out.append(span)
    return out


def cited_identifiers(text: str) -> list[str]:
    """Paper identifiers a text names, in order of first mention (bibcodes, ``arXiv:`` ids, DOIs)."""
    return list(dict.fromkeys(ident for _, _, ident in _citations(text)))


def use_keys(text: str, keys: dict[str, str]) -> str:
    """The text with each cited identifier that has a key written as a citation, ``[@key]``."""
    out: list[str] = []
    last = 0
    for start, end, ident in _citations(text):
        if ident in keys:
            out += [text[last:start], f"[@{keys[ident]}]"]
            last = end
    return "".join(out) + text[last:]


def entry_key(record: "PaperRecord") -> str:
    """The BibTeX key of a paper (see the module docstring)."""
    if record.bibcode:
        return record.bibcode
    if record.arxiv_id:
        return f"arXiv:{record.arxiv_id}"
    return _KEY_UNSAFE.sub("_", record.id) or "paper"


def _clean(text: str) -> str:
    """Metadata text for a field: one line, no braces (they could close the field)."""
    return " ".join(re.sub(r"[{}]", "", text or "").split())


def local_entry(record: "PaperRecord", key: str | None = None) -> str:
    """An entry built from the stored metadata: ``@article`` when a journal is known, else ``@misc``."""
    import bibtexparser
    from bibtexparser.middlewares import LatexEncodingMiddleware
    from bibtexparser.model import Entry, Field

    values: list[tuple[str, str]] = [
        ("author", " and ".join(_clean(a) for a in record.authors if _clean(a))),
        ("title", _clean(record.title)),
        ("journal", _clean(record.journal)),
        ("year", str(record.year or "")),
        ("doi", _clean(record.doi or "")),
    ]
    if record.arxiv_id:
        category = record.metadata.get("primary_category") or next(iter(record.metadata.get("arxiv_class") or []), "")
        values += [("eprint", record.arxiv_id), ("archivePrefix", "arXiv"), ("primaryClass", _clean(str(category)))]
        if not record.journal:
            values.append(("howpublished", "arXiv e-print"))
    values.append(("url", _clean(record.url) or (f"https://arxiv.org/abs/{record.arxiv_id}" if record.arxiv_id else "")))
    kind = "article" if record.journal else "misc"
    fields = [Field(name, value) for name, value in values if value]
    library = bibtexparser.Library([Entry(kind, key or entry_key(record), fields)])
    text = bibtexparser.write_string(library, prepend_middleware=[LatexEncodingMiddleware()])
    check = bibtexparser.parse_string(text)
    if check.failed_blocks or len(check.entries) != 1 or set(check.entries[0].fields_dict) != {f.key for f in fields}:
        raise ValueError(f"could not write a valid BibTeX entry for {record.id}")  # never expected: a bug
    return text.strip() + "\n"


class BibtexService:
    def __init__(self, ads: "AdsClient", library: "LibraryService") -> None:
        self.ads = ads
        self.library = library

    async def papers(self, identifiers: Iterable[str], problems: list[str], *, fetch: bool = True,
                     found: dict[str, str] | None = None) -> list["PaperRecord"]:
        """The library records of ``identifiers`` (with ``fetch``, metadata fetched and stored for unknown
        ones, as get_paper_metadata does); one that cannot be resolved is noted in ``problems`` and
        skipped. ``found`` collects identifier → paper id."""
        records: list["PaperRecord"] = []
        for ident in dict.fromkeys(i.strip() for i in identifiers if i and i.strip()):
            try:
                record = await self.library.resolve(ident, fetch=fetch)
            except AstroError as exc:
                hint = "" if fetch else " (add it with `astro-jupyter library add`)"
                problems.append(f"{ident}: {exc}{hint}")
                continue
            records.append(record)
            if found is not None:
                found[ident] = record.id
        return records

    async def for_texts(self, texts: Iterable[str], *, fetch: bool = True) -> BibResult:
        """Entries for every paper the texts cite (see ``cited_identifiers``), in order of first mention;
        without ``fetch`` only papers already in the library (no metadata lookups)."""
        problems: list[str] = []
        idents = [i for text in texts for i in cited_identifiers(text or "")]
        found: dict[str, str] = {}
        result = await self.entries(await self.papers(idents, problems, fetch=fetch, found=found))
        result.problems[:0] = problems
        keys = result.keys()
        result.cited = {ident: keys[paper_id] for ident, paper_id in found.items() if paper_id in keys}
        return result

    async def entries(self, records: Iterable["PaperRecord"]) -> BibResult:
        """One entry per paper (ADS's where it can, local otherwise), keys unique, in the order given."""
        papers = list({r.id: r for r in records}.values())
        result = BibResult()
        from_ads: dict[str, str] = {}
        with_bibcode = [r for r in papers if r.bibcode]
        if with_bibcode and not self.ads.configured:
            result.problems.append("ADS_API_TOKEN is not set: entries built from the library's metadata")
        elif with_bibcode:
            from_ads = await self._from_ads(with_bibcode, result.problems)
        used: set[str] = set()
        for record in papers:
            key = entry_key(record)
            if record.bibcode and record.bibcode in from_ads:
                text, source = from_ads[record.bibcode], "ads"
            else:
                if key in used:
                    key = _unique(key, used)
                text, source = local_entry(record, key), "local"
            used.add(key)
            result.entries.append(BibEntry(key, record.id, text, source))
        return result

    async def _from_ads(self, records: list["PaperRecord"], problems: list[str]) -> dict[str, str]:
        """bibcode → ADS's entry text, for the records ADS answered correctly; the rest noted in problems."""
        import bibtexparser

        wanted = {r.bibcode: r for r in records if r.bibcode}
        try:
            export = await self.ads.export_bibtex(list(wanted))
        except AstroError as exc:
            problems.append(f"NASA ADS export failed ({exc}): entries built from the library's metadata")
            return {}
        parsed = bibtexparser.parse_string(export)
        if not parsed.entries:
            problems.append("NASA ADS export answer held no BibTeX entry: entries built from the library's metadata")
            return {}
        found: dict[str, str] = {}
        for entry in parsed.entries:
            bibcode = _entry_bibcode(entry)
            record = wanted.get(bibcode or "")
            if record is None:
                problems.append(f"NASA ADS returned a record that was not asked for ({entry.key}): ignored")
                continue
            doi = str(entry.fields_dict["doi"].value).strip("{} ") if "doi" in entry.fields_dict else ""
            if doi and record.doi and doi.lower() != record.doi.lower():
                problems.append(f"NASA ADS returned {bibcode} with DOI {doi}, not {record.doi}: ignored")
                continue
            entry.key = bibcode  # the key the local entries and the log use, whatever ADS's keyformat
            found[bibcode] = _entry_text(entry)
        for bibcode in wanted:
            if bibcode not in found:
                problems.append(f"NASA ADS has no BibTeX for {bibcode}: entry built from the library's metadata")
        return found


def _entry_bibcode(entry: object) -> str | None:
    """The bibcode an ADS entry is for: its ``adsurl`` (``.../abs/BIBCODE``), else its key."""
    fields = getattr(entry, "fields_dict", {})
    if "adsurl" in fields:
        url = str(fields["adsurl"].value).strip("{} ")
        match = re.search(r"/abs/([^/?#]+)", url)
        if match:
            from urllib.parse import unquote

            return unquote(match.group(1))
    return str(getattr(entry, "key", "")) or None


def _entry_text(entry: object) -> str:
    import bibtexparser

    return bibtexparser.write_string(bibtexparser.Library([entry])).strip() + "\n"  # type: ignore[list-item]


def _unique(key: str, used: set[str]) -> str:
    n = 2
    while f"{key}-{n}" in used:
        n += 1
    return f"{key}-{n}"
