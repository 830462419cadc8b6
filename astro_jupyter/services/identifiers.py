"""Paper identifiers: parse whatever a person or the model typed, normalise it, name the paper.

Accepted forms (case and surrounding whitespace forgiven):

- arXiv, new style ``2301.01234`` / ``2301.01234v2``, old style ``astro-ph/0601001`` /
  ``astro-ph/0601001v3``, with or without an ``arXiv:`` prefix; the version is split off
  and kept separately, because the library holds one entry per paper, not per version.
- DOIs ``10.3847/1538-4357/ac1234`` (``doi:`` prefix optional); arXiv's own DataCite DOIs
  ``10.48550/arXiv.2301.01234`` are treated as the arXiv id they name.
- ADS bibcodes (19 characters, ``2023ApJ...945L..12S``; ``bib:``/``bibcode:`` prefix optional).
- URLs of arxiv.org (``/abs/``, ``/pdf/``), ui.adsabs.harvard.edu / adsabs.harvard.edu
  (``/abs/<bibcode>``) and doi.org / dx.doi.org.
- Library ids (see below) parse back to what they name.

Library ids — one scheme, stable once assigned (a later-learned arXiv id does not rename
a paper): ``arxiv:<id>`` when the paper has an arXiv id, else ``doi:<lower-case doi>``,
else ``bib:<bibcode>``, else ``local:<slug>`` for a PDF added from disk. ``pdf_filename``
turns an id into a safe file name for ``papers/``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote, urlsplit

from ..errors import InvalidInput

IdKind = Literal["arxiv", "doi", "bibcode", "local"]

_NEW_ARXIV = re.compile(r"^(\d{4}\.\d{4,5})(v\d+)?$")
_OLD_ARXIV = re.compile(r"^([a-z][a-z\-]*(?:\.[A-Za-z]{2})?/\d{7})(v\d+)?$", re.IGNORECASE)
_DOI = re.compile(r"^10\.\d{4,9}/\S+$")
_ARXIV_DOI = re.compile(r"^10\.48550/arxiv\.(.+)$", re.IGNORECASE)
_BIBCODE = re.compile(r"^\d{4}[A-Za-z&][A-Za-z0-9&.:]{13}[A-Za-z.]$")
_LOCAL = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_UNSAFE_FILE_CHARS = re.compile(r"[^A-Za-z0-9._-]+")
_PREFIXES: dict[str, IdKind] = {
    "arxiv": "arxiv",
    "doi": "doi",
    "bib": "bibcode",
    "bibcode": "bibcode",
    "local": "local",
}


class IdentifierError(InvalidInput):
    """The text is not an arXiv id, DOI, bibcode, known URL or library id."""


@dataclass(frozen=True)
class PaperIdentifier:
    """A normalised identifier: ``kind`` + ``value`` (+ ``version`` for arXiv)."""

    kind: IdKind
    value: str
    version: str = ""

    @property
    def paper_id(self) -> str:
        """The library id this identifier would give a new paper (see module docstring)."""
        if self.kind == "arxiv":
            return f"arxiv:{self.value}"
        if self.kind == "doi":
            return f"doi:{self.value.lower()}"
        if self.kind == "bibcode":
            return f"bib:{self.value}"
        return f"local:{self.value}"

    def __str__(self) -> str:
        return self.value + self.version


def normalize_arxiv(text: str) -> tuple[str, str] | None:
    """``'arXiv:2301.01234v2'`` → ``('2301.01234', 'v2')``; ``None`` if it is not an arXiv id."""
    raw = text.strip()
    if raw.lower().startswith("arxiv:"):
        raw = raw[6:].strip()
    if raw.lower().endswith(".pdf"):
        raw = raw[:-4]
    match = _NEW_ARXIV.match(raw)
    if match:
        return match.group(1), match.group(2) or ""
    match = _OLD_ARXIV.match(raw)
    if match:
        archive, number = match.group(1).split("/")
        name, dot, subject = archive.partition(".")
        return f"{name.lower()}{dot}{subject.upper()}/{number}", match.group(2) or ""
    return None


def normalize_doi(text: str) -> str | None:
    raw = text.strip()
    if raw.lower().startswith("doi:"):
        raw = raw[4:].strip()
    return raw if _DOI.match(raw) else None


def is_bibcode(text: str) -> bool:
    return len(text) == 19 and bool(_BIBCODE.match(text))


def _from_url(text: str) -> PaperIdentifier | None:
    parts = urlsplit(text)
    host = (parts.hostname or "").lower()
    path = unquote(parts.path)
    if host.endswith("arxiv.org"):
        match = re.match(r"^/(?:abs|pdf|html|format)/(.+?)/?$", path)
        if match:
            found = normalize_arxiv(match.group(1))
            if found:
                return PaperIdentifier("arxiv", *found)
        return None
    if host.endswith("adsabs.harvard.edu"):
        match = re.match(r"^/(?:#?abs|link_gateway)/([^/]+)", path.replace("/#abs/", "/abs/"))
        if match and is_bibcode(match.group(1)):
            return PaperIdentifier("bibcode", match.group(1))
        return None
    if host in {"doi.org", "dx.doi.org", "www.doi.org"}:
        return _from_doi(path.lstrip("/"))
    return None


def _from_doi(doi_text: str) -> PaperIdentifier | None:
    doi = normalize_doi(doi_text)
    if doi is None:
        return None
    arxiv_doi = _ARXIV_DOI.match(doi)
    if arxiv_doi:
        found = normalize_arxiv(arxiv_doi.group(1))
        if found:
            return PaperIdentifier("arxiv", *found)
    return PaperIdentifier("doi", doi)


def parse_identifier(text: str) -> PaperIdentifier:
    """Parse any accepted form; raise ``IdentifierError`` with the accepted forms otherwise."""
    raw = (text or "").strip().strip("<>").strip()
    if not raw:
        raise IdentifierError("empty paper identifier")
    if raw.lower().startswith(("http://", "https://")):
        found = _from_url(raw)
        if found:
            return found
        raise IdentifierError(f"no arXiv id, bibcode or DOI found in URL {raw!r}")
    prefix, sep, rest = raw.partition(":")
    kind = _PREFIXES.get(prefix.lower()) if sep else None
    if kind == "arxiv":
        found = normalize_arxiv(rest)
        if found:
            return PaperIdentifier("arxiv", *found)
    elif kind == "doi":
        by_doi = _from_doi(rest)
        if by_doi:
            return by_doi
    elif kind == "bibcode" and is_bibcode(rest.strip()):
        return PaperIdentifier("bibcode", rest.strip())
    elif kind == "local" and _LOCAL.match(rest.strip()):
        return PaperIdentifier("local", rest.strip())
    found = normalize_arxiv(raw)
    if found:
        return PaperIdentifier("arxiv", *found)
    by_doi = _from_doi(raw)
    if by_doi:
        return by_doi
    if is_bibcode(raw):
        return PaperIdentifier("bibcode", raw)
    raise IdentifierError(
        f"{raw!r} is not a paper identifier; use an arXiv id (2301.01234, astro-ph/0601001), "
        "a DOI (10.xxxx/...), an ADS bibcode (19 characters), an arxiv.org/ADS/doi.org URL or a library id"
    )


def paper_id_for(arxiv_id: str | None, doi: str | None, bibcode: str | None) -> str | None:
    """The library id for a record with these identifiers (arXiv first, then DOI, then bibcode)."""
    if arxiv_id:
        return f"arxiv:{arxiv_id}"
    if doi:
        return f"doi:{doi.lower()}"
    if bibcode:
        return f"bib:{bibcode}"
    return None


def slugify(text: str, *, max_len: int = 60) -> str:
    """A lower-case ASCII slug for ``local:`` ids (file name or title of a local PDF)."""
    import unicodedata

    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
    return (slug[:max_len].rstrip("-") or "paper")


def pdf_filename(paper_id: str) -> str:
    """``'arxiv:astro-ph/0601001'`` → ``'arxiv_astro-ph_0601001.pdf'`` (safe on every filesystem)."""
    stem = _UNSAFE_FILE_CHARS.sub("_", paper_id).strip("._") or "paper"
    return f"{stem[:150]}.pdf"
