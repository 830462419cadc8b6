"""A fake CDS Sesame resolver on loopback: ``GET /-oxp/[~]SNV?NAME`` → recorded-shape XML.

Known names (case- and whitespace-insensitive) map to files in tests/data/sesame/; any other
name gets the real "Nothing found" answer (HTTP 200, INFO elements only). The recorded files
hold one ``<Resolver>`` block per database that knows the object. Like the real service,
``-oxp/SNV`` stops at the first database that answers (later blocks are dropped) and
``-oxp/~SNV`` asks every listed database (all blocks of the listed databases are kept).
``state`` knobs: ``fail_status`` (answer that HTTP status), ``delay`` (seconds before answering).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit
from xml.sax.saxutils import escape

from .base import FakeHandler, FakeServer

DATA = Path(__file__).resolve().parents[1] / "data" / "sesame"

KNOWN: dict[str, str] = {
    "m31": "m31.xml",
    "m 31": "m31.xml",
    "andromeda": "m31.xml",
    "ngc 224": "m31.xml",
    "m87": "m87.xml",
    "m 87": "m87.xml",
    "virgo a": "m87.xml",
    "sgr a*": "sgr_a_star.xml",
    "sgra*": "sgr_a_star.xml",
    "α cen a": "alf_cen_a.xml",
    "alf cen a": "alf_cen_a.xml",
}


def normalise(name: str) -> str:
    return re.sub(r"\s+", " ", name.strip()).lower()


class _SesameHandler(FakeHandler):
    def do_GET(self) -> None:  # noqa: N802
        req = self.record()
        fake = self.fake
        if fake.state.get("delay"):
            time.sleep(float(fake.state["delay"]))
        if fake.state.get("fail_status"):
            self.send_body(int(fake.state["fail_status"]), b"<html><body>Service temporarily unavailable</body></html>", "text/html")
            return
        option = unquote(req.path.rsplit("/-oxp/", 1)[-1]) if "/-oxp/" in req.path else ""
        letters = option.lstrip("~")
        if not letters or set(letters) - set("SNVA") or option.count("~") > 1:
            self.send_body(404, b"unknown path", "text/plain")
            return
        raw = urlsplit(self.path).query
        name = unquote(raw)
        with fake.lock:
            fake.state.setdefault("names", []).append(name)
            fake.state.setdefault("options", []).append(option)
            fake.state.setdefault("times", []).append(time.perf_counter())
        fixture = KNOWN.get(normalise(name))
        if fixture:
            body = (DATA / fixture).read_text(encoding="utf-8")
        else:
            body = (DATA / "not_found.xml").read_text(encoding="utf-8").replace("NAME_PLACEHOLDER", escape(name))
        body = select_resolvers(body, letters, every=option.startswith("~")).replace('option="SNV"', f'option="{escape(option)}"')
        self.send_body(200, body.encode("utf-8"), "text/xml;charset=UTF-8")


_RESOLVER = re.compile(r"[ \t]*<Resolver name=\"(\w)=.*?</Resolver>\n?", re.S)


def select_resolvers(body: str, letters: str, *, every: bool) -> str:
    """The blocks Sesame would send: listed databases only; without ``~`` up to the first hit."""
    wanted = set("SNV") if "A" in letters else set(letters)
    found = False

    def keep(match: "re.Match[str]") -> str:
        nonlocal found
        if match.group(1) not in wanted or (found and not every):
            return ""
        found = found or "<jradeg>" in match.group(0)
        return match.group(0)

    return _RESOLVER.sub(keep, body)


@dataclass
class FakeSesameServer(FakeServer):
    handler: type[FakeHandler] = _SesameHandler

    @property
    def names_asked(self) -> list[str]:
        with self.lock:
            return list(self.state.get("names", []))

    @property
    def options_asked(self) -> list[str]:
        """The database option of each request (``SNV``, ``~SNV``), in order."""
        with self.lock:
            return list(self.state.get("options", []))
