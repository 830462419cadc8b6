"""``GET astro/api/auth/me``: the Jupyter identity the request carries (and the owner key it maps to)."""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from tornado import web

from .base import AUTH_RESOURCE, AstroHandler


class MeHandler(AstroHandler):
    auth_resource = AUTH_RESOURCE

    @web.authenticated
    @authorized
    async def get(self) -> None:
        identity = self.identity_provider.identity_model(self.current_user)
        self.write_json({**identity, "owner": self.owner})


handlers = [
    (r"astro/api/auth/me", MeHandler),
]
