"""A loopback file server for download tests: PDFs, HTML landing pages, redirects, errors, slow bodies.

Routes live in ``state["routes"]``: path → ``Route``. Unknown paths answer 404. A slow route
(``delay`` > 0) sends its body in ``chunk_size`` pieces with a pause before each, so a test
can cancel a download half-way. ``make_pdf`` builds a small real PDF with PyMuPDF.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .base import FakeHandler, FakeServer


@dataclass
class Route:
    body: bytes = b""
    content_type: str = "application/pdf"
    status: int = 200
    location: str = ""  # set for a redirect (status 301/302/303/307/308)
    delay: float = 0.0  # seconds before each chunk (slow download)
    chunk_size: int = 16384
    headers: dict[str, str] = field(default_factory=dict)
    declared_length: int | None = None  # lie about Content-Length (truncated download)


def make_pdf(title: str = "A test paper", pages: int = 1, extra_text: str = "") -> bytes:
    import pymupdf

    doc = pymupdf.open()
    for n in range(pages):
        page = doc.new_page()
        if n == 0:
            page.insert_text((72, 90), title, fontsize=20)
        page.insert_text((72, 140), extra_text or f"Page {n + 1} of a test paper.", fontsize=10)
    data = doc.tobytes()
    doc.close()
    return bytes(data)


def landing_page(pdf_url: str = "", title: str = "Article") -> bytes:
    meta = f'<meta name="citation_pdf_url" content="{pdf_url}">' if pdf_url else ""
    return (
        f"<!DOCTYPE html><html><head><title>{title}</title>"
        f'<meta name="citation_title" content="{title}">{meta}</head>'
        f"<body><h1>{title}</h1><p>Subscribe to read the full text.</p></body></html>"
    ).encode()


class FileHandler(FakeHandler):
    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        req = self.record()
        route: Route | None = (self.fake.state.get("routes") or {}).get(req.path)
        if route is None:
            self.send_body(404, b"<html><body>Not Found</body></html>", "text/html")
            return
        if route.location:
            self.send_body(route.status, b"", "text/html", {"Location": route.location, **route.headers})
            return
        if route.delay <= 0 and route.declared_length is None:
            self.send_body(route.status, route.body, route.content_type, route.headers)
            return
        length = route.declared_length if route.declared_length is not None else len(route.body)
        head = [f"HTTP/1.1 {route.status} OK", f"Content-Type: {route.content_type}", f"Content-Length: {length}"]
        head += [f"{k}: {v}" for k, v in route.headers.items()]
        try:
            self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode())
            self.wfile.flush()
            for i in range(0, len(route.body), route.chunk_size):
                time.sleep(route.delay)
                self.wfile.write(route.body[i : i + route.chunk_size])
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            return
        self.close_connection = True


def file_server() -> FakeServer:
    return FakeServer(FileHandler)
