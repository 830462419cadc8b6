"""The paper library: ``astro/api/papers`` (list with state, add by identifier) and one paper (show, remove)."""

from __future__ import annotations

from urllib.parse import unquote

from jupyter_server.auth.decorator import authorized
from tornado import web

from .base import AUTH_RESOURCE, AstroHandler
from ..errors import InvalidRequest

STATES = ("metadata", "downloaded", "parsed")


class PapersHandler(AstroHandler):
    auth_resource = AUTH_RESOURCE

    @web.authenticated
    @authorized
    async def get(self) -> None:
        state = self.get_argument("state", None) or None
        if state is not None and state not in STATES:
            raise InvalidRequest(f"'state' must be one of {', '.join(STATES)}", reason="invalid_argument")
        limit = self.int_arg("limit", 1000, 1, 10_000)
        self.write_json({"papers": await self.service.list_papers(state=state, limit=limit)})

    @web.authenticated
    @authorized
    async def post(self) -> None:
        body = self.json_body()
        download = body.get("download", True)
        if not isinstance(download, bool):
            raise InvalidRequest("'download' must be true or false")
        paper = await self.service.add_paper(self.owner, body.get("identifier"), download=download)
        self.write_json(paper, status=201)


class PaperHandler(AstroHandler):
    auth_resource = AUTH_RESOURCE

    @web.authenticated
    @authorized
    async def get(self, paper_id: str) -> None:
        self.write_json(await self.service.get_paper(unquote(paper_id)))

    @web.authenticated
    @authorized
    async def delete(self, paper_id: str) -> None:
        removed = await self.service.remove_paper(unquote(paper_id))
        self.write_json({"removed": removed.record.id, "chunks": removed.chunks})


handlers = [
    (r"astro/api/papers", PapersHandler),
    (r"astro/api/papers/(?P<paper_id>[^?#]{1,300})", PaperHandler),
]
