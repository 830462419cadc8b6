"""``astro/api/catalog-results/{id}``: download a stored catalog result as VOTable or CSV.

The sidebar's links under a query_catalog / cone_search table. Owner-scoped in the application
layer (another user's result is "not found"); a VOTable is sent in chunks from its file.
"""

from __future__ import annotations

import re

from jupyter_server.auth.decorator import authorized
from tornado import web

from .base import AUTH_RESOURCE, AstroHandler

_CHUNK = 1 << 20


class CatalogResultHandler(AstroHandler):
    auth_resource = AUTH_RESOURCE

    @web.authenticated
    @authorized
    async def get(self, result_id: str) -> None:
        fmt = (self.get_argument("format", "votable") or "votable").lower()
        download = await self.service.catalog_download(self.owner, result_id, fmt)
        self.set_header("Content-Type", download.media_type)
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", download.filename)
        self.set_header("Content-Disposition", f'attachment; filename="{name}"')
        self.set_header("X-Content-Type-Options", "nosniff")
        if download.data is not None:
            self.write(download.data)
        else:
            assert download.path is not None
            with open(download.path, "rb") as fh:
                while chunk := fh.read(_CHUNK):
                    self.write(chunk)
                    await self.flush()
        self.finish(set_content_type=download.media_type)  # APIHandler would say application/json


handlers = [
    (r"astro/api/catalog-results/(?P<result_id>[^/?#]{1,100})", CatalogResultHandler),  # unknown ids: 404 JSON
]
