"""LLM-model routes: ``GET astro/api/models`` (current + what the endpoint offers), ``PUT astro/api/models/current``."""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from tornado import web

from .base import AUTH_RESOURCE, AstroHandler


class ModelsHandler(AstroHandler):
    auth_resource = AUTH_RESOURCE

    @web.authenticated
    @authorized
    async def get(self) -> None:
        self.write_json(await self.service.models(self.owner))


class CurrentModelHandler(AstroHandler):
    auth_resource = AUTH_RESOURCE

    @web.authenticated
    @authorized
    async def put(self) -> None:
        body = self.json_body()
        self.write_json(await self.service.switch_model(self.owner, body.get("model")))


handlers = [
    (r"astro/api/models", ModelsHandler),
    (r"astro/api/models/current", CurrentModelHandler),
]
