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


def clean_line(text: str) -> str:
    """Ligatures expanded; soft hyphens inside the line dropped, one at the line end kept
    (it marks a word broken across lines, which ``join_lines`` closes up)."""
    if text.isascii():
        return text
    text = text.translate(_LIGATURES)
    if SOFT_HYPHEN in text:
        trailing = text.endswith(SOFT_HYPHEN)
        text = text.replace(SOFT_HYPHEN, "")
        if trailing:
            text += SOFT_HYPHEN
    return text


# -- words broken across lines -----------------------------------------------------------------
_BROKEN = re.compile(r"([^\W\d_]+)\u00ad([^\W\d_]+)")
_WORD = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*")


def join_lines(a: str, b: str) -> str:
    """Join two lines of one paragraph. A line ending in a hyphen before a lower-case word
    is a candidate word break: joined with a soft-hyphen marker that ``resolve_breaks``
    turns into "observations" or "high-resolution" once the whole document is known."""
    if a.endswith(SOFT_HYPHEN):
        return a[:-1] + b
    if a.endswith("-") and b[:1].islower() and len(a) > 1 and a[-2].isalpha():
        return a[:-1] + SOFT_HYPHEN + b
    return a + " " + b


def resolve_breaks(texts: list[str]) -> list[str]:
    """Close up or keep each marked line-end hyphen, judged against the document's own words:
    the joined word occurs elsewhere → join; the hyphenated form occurs, or both halves are
    words while the joined form is not → keep the hyphen; otherwise (a typeset break such as
    "observa-tions") → join."""
    marked = [i for i, t in enumerate(texts) if SOFT_HYPHEN in t]
    if not marked:
        return texts
    vocab: set[str] = set()
    for text in texts:
        # the broken words themselves are left out: their halves are not evidence
        for word in _WORD.findall(_BROKEN.sub(" ", text) if SOFT_HYPHEN in text else text):
            low = word.lower()
            vocab.add(low)
            if "-" in low:
                vocab.update(low.split("-"))

    def decide(match: re.Match[str]) -> str:
        left, right = match.group(1), match.group(2)
        joined = (left + right).lower()
        if joined in vocab:
            return left + right
        low_l, low_r = left.lower(), right.lower()
        if f"{low_l}-{low_r}" in vocab or (len(low_l) > 1 and low_l in vocab and low_r in vocab):
            return f"{left}-{right}"
        return left + right

    out = list(texts)
    for i in marked:
        out[i] = _BROKEN.sub(decide, out[i]).replace(SOFT_HYPHEN, "")
    return out
