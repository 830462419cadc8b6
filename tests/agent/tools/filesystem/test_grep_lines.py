"""``grep_files`` finds exactly the lines a line-by-line scan finds, whichever path it takes.

The whole-text scan (``grep.matching_lines``) is only a faster way to the same answer: these
tests compare it with ``re.search`` on each of ``str.splitlines()`` for generated texts and
patterns, including anchors, lookarounds, classes that match a newline, empty matches and other
line breaks.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from astro_jupyter.agent.tools.filesystem.grep import matching_lines, whole_text_form

ATOMS = ["a", "b", "ab", " ", ".", "\\w", "\\W", "\\s", "\\S", "\\d", "[^a]", "[ab]", "\\b", "\\B", "^", "$",
         "\\A", "\\Z", "(?=a)", "(?!b)", "(?<=a)", "(?<!b)", "(?![^b])", "(?<![^a])", "(?=\\s)", "\\n", "x*", "a+", ".*", "(?s:.)", "(?-m:$)", "(a|b)"]
TEXT_CHARS = ["a", "b", "x", "1", " ", "\n", "\n", "\n", "\r", "\u2028", "é"]


def by_lines(regex: re.Pattern[str], text: str) -> list[tuple[int, str]]:
    return [(n, line) for n, line in enumerate(text.splitlines(), start=1) if regex.search(line)]


patterns = st.lists(st.sampled_from(ATOMS), min_size=1, max_size=4).map("".join)
texts = st.lists(st.sampled_from(TEXT_CHARS), max_size=60).map("".join)


@settings(max_examples=400, deadline=None)
@given(pattern=patterns, text=texts, ignore_case=st.booleans())
def test_same_lines_as_a_line_by_line_scan(pattern: str, text: str, ignore_case: bool) -> None:
    regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    assert list(matching_lines(regex, whole_text_form(regex), text)) == by_lines(regex, text)


def test_the_fast_path_is_taken_for_a_plain_pattern() -> None:
    """Most greps are plain words: they must not fall back to the per-line scan."""
    regex = re.compile(r"line 7\b")
    whole = whole_text_form(regex)
    assert whole is not None
    text = "".join(f"line {i} of file\n" for i in range(200))
    assert list(matching_lines(regex, whole, text)) == [(8, "line 7 of file")]


def test_patterns_that_see_past_a_line_take_the_scan() -> None:
    for pattern in (r"\Aa", r"a\Z", r"a(?!\n)", r"(?<=\n)a", "a\\n", r"(?-m:a$)", r"a(?![^b])", r"(?<![^x])a"):
        assert whole_text_form(re.compile(pattern)) is None, pattern
    text = "a\nba\n"
    assert list(matching_lines(re.compile(r"\Ab"), None, text)) == [(2, "ba")]
    assert list(matching_lines(re.compile(r"a(?!\n)"), whole_text_form(re.compile(r"a(?!\n)")), text)) == [
        (1, "a"), (2, "ba")]


def test_a_match_across_lines_falls_back() -> None:
    regex = re.compile(r"a\sb")  # \s matches the newline in the whole text, never within a line
    text = "xa\nb\na b\n"
    assert list(matching_lines(regex, whole_text_form(regex), text)) == [(3, "a b")]
    # a match from line 1 running into line 2 would hide line 2's own match from the whole-text scan
    regex = re.compile(r"\s*a")
    assert list(matching_lines(regex, whole_text_form(regex), "a\na\n")) == [(1, "a"), (2, "a")]
    regex = re.compile(r"b[^x]*")
    assert list(matching_lines(regex, whole_text_form(regex), "ab\nb\nc\n")) == [(1, "ab"), (2, "b")]


def test_no_empty_line_after_the_final_break() -> None:
    regex = re.compile("^")
    assert list(matching_lines(regex, whole_text_form(regex), "a\n\nb\n")) == [(1, "a"), (2, ""), (3, "b")]
    assert list(matching_lines(regex, whole_text_form(regex), "")) == []


def test_candidates_are_checked_line_by_line() -> None:
    """The whole text gives a line context it does not have alone: between two line breaks ``\\B``
    matches in the text, but an empty line alone has no position that is not a word boundary...
    whatever this Python says about it, the answer is the line-by-line one."""
    regex = re.compile(r"\B")
    text = "a\n\nb\n"
    assert list(matching_lines(regex, whole_text_form(regex), text)) == by_lines(regex, text)
    regex = re.compile(r"^$")
    assert list(matching_lines(regex, whole_text_form(regex), "x\n\ny")) == [(2, "")]


def test_each_line_once_and_other_line_breaks() -> None:
    regex = re.compile("a")
    assert list(matching_lines(regex, whole_text_form(regex), "aa a\nb\n")) == [(1, "aa a")]
    text = "a\rb\na\u2028a\n"  # splitlines also breaks at \r and U+2028: line numbers follow it
    assert list(matching_lines(regex, whole_text_form(regex), text)) == [(1, "a"), (3, "a"), (4, "a")]
