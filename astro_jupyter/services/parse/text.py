"""Character-level clean-up of extracted PDF text: ligatures and soft hyphens.

MuPDF expands ligatures when ``TEXT_PRESERVE_LIGATURES`` is off, but only glyphs it knows as
ligatures; a font whose ToUnicode map points a glyph at U+FB01 still yields "ﬁ", and then a
search for "profile" misses "proﬁle". So the presentation forms are mapped back as well.
"""

from __future__ import annotations

import re


SOFT_HYPHEN = "\u00ad"

_LIGATURES = {
    0xFB00: "ff",
    0xFB01: "fi",
    0xFB02: "fl",
    0xFB03: "ffi",
    0xFB04: "ffl",
    0xFB05: "st",  # long s + t
    0xFB06: "st",
}


def expand_ligatures(text: str) -> str:
    """"proﬁle" → "profile"; ASCII text is returned as is without scanning it twice."""
    if text.isascii():
        return text
    return text.translate(_LIGATURES)


# the characters ``clean_line`` changes: most non-ASCII lines have none, and ``str.translate``
# looks every character of a non-ASCII string up in its table one by one
_TO_CLEAN = re.compile("[\ufb00-\ufb06\u00ad]")


def clean_line(text: str) -> str:
    """Ligatures expanded; soft hyphens inside the line dropped, one at the line end kept
    (it marks a word broken across lines, which ``join_lines`` closes up)."""
    if text.isascii() or not _TO_CLEAN.search(text):
        return text
    text = text.translate(_LIGATURES)
    if SOFT_HYPHEN in text:
        trailing = text.endswith(SOFT_HYPHEN)
        text = text.replace(SOFT_HYPHEN, "")
        if trailing:
            text += SOFT_HYPHEN
    return text


# -- words broken across lines -----------------------------------------------------------------


def join_lines(a: str, b: str) -> str:
    """Join two lines of one paragraph. A line ending in a hyphen before a lower-case word
    is a candidate word break: joined with a soft-hyphen marker that ``resolve_breaks``
    turns into "observations" or "high-resolution" once the whole document is known."""
    if a.endswith(SOFT_HYPHEN):
        return a[:-1] + b
    if a.endswith("-") and len(a) > 1 and b:
        if b[0].islower() and a[-2].isalpha():
            return a[:-1] + SOFT_HYPHEN + b
        if (b[0].isupper() or b[0].isdigit()) and a[-2].isalnum():
            return a + b  # a real hyphen: "Hertzsprung-Russell", "non-LTE", "H-alpha", "2-3"
    return a + " " + b


def _breaks(text: str) -> list[tuple[int, int, int]]:
    """(start, marker, end) of each marked word: letters either side of a soft hyphen."""
    out = []
    at = text.find(SOFT_HYPHEN)
    while at >= 0:
        start, end = at, at + 1
        while start > 0 and text[start - 1].isalpha():
            start -= 1
        while end < len(text) and text[end].isalpha():
            end += 1
        out.append((start, at, end))
        at = text.find(SOFT_HYPHEN, end)
    return out


_PUNCT = ".,;:!?()[]{}\"'“”‘’/\\|<>=+*&%$#@~^`–—0123456789"


def resolve_breaks(texts: list[str]) -> list[str]:
    """Close up or keep each marked line-end hyphen, judged against the document's own words:
    the joined word occurs elsewhere → join; the hyphenated form occurs, or both halves are
    words while the joined form is not → keep the hyphen; otherwise (a typeset break such as
    "observa-tions") → join. Plain string scans: this runs once per document, on every parse."""
    marked = {i: _breaks(t) for i, t in enumerate(texts) if SOFT_HYPHEN in t}
    if not marked:
        return texts
    words: set[str] = set()
    for i, text in enumerate(texts):
        if i in marked:  # the broken words themselves are no evidence
            pieces, last = [], 0
            for start, _, end in marked[i]:
                pieces.append(text[last:start])
                last = end
            pieces.append(text[last:])
            text = " ".join(pieces)
        words.update(text.lower().split())
    words = {w.strip(_PUNCT) for w in words}
    words.update([part for w in words if "-" in w for part in w.split("-")])

    out = list(texts)
    for i, breaks in marked.items():
        text = texts[i]
        pieces, last = [], 0
        for start, at, end in breaks:
            left, right = text[start:at], text[at + 1:end]
            low_l, low_r = left.lower(), right.lower()
            if not left or not right or (low_l + low_r) in words:
                joint = ""
            elif f"{low_l}-{low_r}" in words or (len(low_l) > 1 and low_l in words and low_r in words):
                joint = "-"
            else:
                joint = ""
            pieces.append(text[last:start] + left + joint + right)
            last = end
        pieces.append(text[last:])
        out[i] = "".join(pieces).replace(SOFT_HYPHEN, "")
    return out
