"""The bookmarklet: its page, its token, and the one cross-origin route it posts to.

``astro/bookmarklet`` (logged-in page) makes, on a button press (an XSRF-checked POST), a ``javascript:`` link carrying the user's own
token. Clicked on an arXiv or ADS abstract page, the script finds the paper's identifier in
the URL (``arxiv.org/abs/ID``, ``ui.adsabs.harvard.edu/abs/BIBCODE``) or in the page's meta
tags (``citation_arxiv_id``, ``citation_doi``, ``dc.identifier``) and posts it to
``astro/api/bookmarklet/intake``. That route is the only one answering CORS (any origin,
never credentials), checks no XSRF (there is no cookie to forge) and accepts nothing but
that token; all it can do is queue an identifier (see ``intake.py``).
"""

from __future__ import annotations

import html
import json
from typing import Any

from jupyter_server.auth.decorator import allow_unauthenticated, authorized
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.extension.handler import ExtensionHandlerMixin
from jupyter_server.utils import url_path_join
from tornado import web

from .base import AUTH_RESOURCE, SERVICE_KEY, AstroHandler, owner_of
from ..errors import InvalidRequest
from ..app import AstroApp

INTAKE_PATH = "astro/api/bookmarklet/intake"
TOKEN_PATH = "astro/api/bookmarklet/token"

# The script, kept readable here and squeezed into one line for the javascript: URL.
_SCRIPT = r"""
(function(){
var U=__URL__,T=__TOKEN__,h=location.href,id=null,m;
function meta(n){var e=document.querySelector('meta[name="'+n+'" i],meta[property="'+n+'" i]');return e&&e.getAttribute('content');}
if((m=h.match(/arxiv\.org\/(?:abs|pdf|html)\/([^?#]+?)(?:\.pdf)?\/?(?:[?#]|$)/i)))id='arXiv:'+decodeURIComponent(m[1]);
else if((m=h.match(/adsabs\.harvard\.edu\/(?:#?abs)\/([^\/?#]+)/i)))id=decodeURIComponent(m[1]);
if(!id){var a=meta('citation_arxiv_id'),d=meta('citation_doi')||meta('dc.identifier');if(a)id='arXiv:'+a;else if(d)id=d;}
if(!id){alert('astro-jupyter: no arXiv id, ADS bibcode or DOI found on this page');return;}
fetch(U,{method:'POST',mode:'cors',credentials:'omit',headers:{'Authorization':'Bearer '+T,'Content-Type':'application/json'},
body:JSON.stringify({identifier:id,page_url:h,page_title:document.title})})
.then(function(r){return r.json().then(function(j){alert(r.ok?'astro-jupyter: queued '+j.identifier+' for download':'astro-jupyter: '+(j.message||r.status));});})
.catch(function(e){alert('astro-jupyter: could not reach Jupyter ('+e+')');});
})();
"""


def bookmarklet_source(intake_url: str, token: str) -> str:
    """The script with its URL and token filled in (JSON-quoted, so nothing can break out)."""
    body = _SCRIPT.replace("__URL__", json.dumps(intake_url)).replace("__TOKEN__", json.dumps(token))
    return "".join(line.strip() for line in body.strip().splitlines())


def bookmarklet_href(intake_url: str, token: str) -> str:
    from urllib.parse import quote

    return "javascript:" + quote(bookmarklet_source(intake_url, token), safe="(){}[];,:=+!'/.?&|*<>-_$@~")


def intake_url_for(handler: web.RequestHandler) -> str:
    base = handler.settings.get("base_url", "/")
    return f"{handler.request.protocol}://{handler.request.host}{url_path_join(base, INTAKE_PATH)}"


class BookmarkletPageHandler(ExtensionHandlerMixin, JupyterHandler):
    """The HTML page. A GET changes nothing: the token is made by the page's button, a POST to
    the token route that carries the XSRF token, so a cross-site GET or a prefetch cannot mint one."""

    auth_resource = AUTH_RESOURCE

    @property
    def service(self) -> AstroApp:
        return self.settings[SERVICE_KEY]

    @web.authenticated
    @authorized
    async def get(self) -> None:
        await self.service.start()
        owner = owner_of(self.current_user)
        status = await self.service.bookmarklet_status(owner)
        self.set_header("Cache-Control", "no-store")
        self.finish(render_page(
            intake_url=intake_url_for(self),
            token_url=url_path_join(self.settings.get("base_url", "/"), TOKEN_PATH),
            xsrf=self.xsrf_token.decode("ascii"),
            status=status,
            recent=await self.service.recent_intake(owner),
        ))


class BookmarkletTokenHandler(AstroHandler):
    """``POST {}`` replaces the token (the old one stops working); ``POST {"revoke": true}`` only revokes."""

    auth_resource = AUTH_RESOURCE

    @web.authenticated
    @authorized
    async def post(self) -> None:
        body = self.json_body(required=False)
        revoke = body.get("revoke", False)
        if not isinstance(revoke, bool):
            raise InvalidRequest("'revoke' must be true or false")
        if revoke:
            self.write_json({"revoked": await self.service.revoke_bookmarklet_token(self.owner)})
            return
        token = await self.service.rotate_bookmarklet_token(self.owner)
        url = intake_url_for(self)
        self.set_header("Cache-Control", "no-store")
        self.write_json({"token": token, "intake_url": url, "bookmarklet": bookmarklet_href(url, token)}, status=201)


class BookmarkletIntakeHandler(AstroHandler):
    """Cross-origin, token-only: queue one paper identifier."""

    auth_resource = AUTH_RESOURCE

    def set_default_headers(self) -> None:
        super().set_default_headers()
        # Set here (not in prepare) so error answers, which clear headers, keep them too.
        self.set_header("Access-Control-Allow-Origin", "*")
        self.set_header("Access-Control-Allow-Methods", "POST, OPTIONS")
        self.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type")
        self.set_header("Access-Control-Max-Age", "600")

    def check_origin(self, origin_to_satisfy_tornado: str = "") -> bool:
        return True  # any page may post here; the token is the credential

    def check_xsrf_cookie(self) -> None:
        return None  # no cookie is used on this route, so there is nothing to forge

    @allow_unauthenticated
    def options(self, *args: Any, **kwargs: Any) -> None:
        if self.request.headers.get("Access-Control-Request-Private-Network", "").lower() == "true":
            self.set_header("Access-Control-Allow-Private-Network", "true")  # Chrome: public page → localhost
        self.set_status(204)
        self.finish()

    @allow_unauthenticated
    async def post(self) -> None:
        body = self.json_body()
        token = _bearer(self.request.headers.get("Authorization", "")) or body.get("token")
        if not isinstance(token, str):
            token = ""
        result = await self.service.intake.accept(
            token, body.get("identifier"), page_url=body.get("page_url") or "", page_title=body.get("page_title") or ""
        )
        self.write_json(result, status=202)


def _bearer(header: str) -> str:
    scheme, _, value = header.strip().partition(" ")
    return value.strip() if scheme.lower() == "bearer" else ""


def _js(value: str) -> str:
    """A JSON string literal safe inside an inline <script>."""
    return json.dumps(value).replace("</", "<\\/")


def _recent_table(recent: list[dict[str, Any]]) -> str:
    if not recent:
        return "<p>Nothing queued yet.</p>"
    esc = html.escape
    rows = "".join(
        f"<tr><td>{esc(str(r['created_at']))}</td><td><code>{esc(r['identifier'])}</code></td>"
        f"<td>{esc(r['status'])}</td><td>{esc(r['error'] or (r['paper_id'] or ''))}</td></tr>"
        for r in recent
    )
    return f"<table id=\"astro-recent\"><tr><th>when</th><th>paper</th><th>status</th><th>result</th></tr>{rows}</table>"


def render_page(
    *, intake_url: str, token_url: str, xsrf: str, status: dict[str, Any] | None,
    recent: list[dict[str, Any]] | None = None,
) -> str:
    esc = html.escape
    link = '<p><a id="astro-bookmarklet" hidden href="#">Add to astro-jupyter</a></p>'
    if status is None:
        state = "You have no bookmarklet yet: make one with the button below."
    else:
        used = status.get("last_used_at") or "never"
        state = (
            f"You already have a bookmarklet (made {esc(str(status.get('created_at', '')))}, last used {esc(used)}). "
            "Its token is stored only as a hash, so it cannot be shown again; make a new one below "
            "(the old bookmarklet then stops working)."
        )
    make = "Make a bookmarklet" if status is None else "Make a new bookmarklet"
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>astro-jupyter bookmarklet</title>
<style>body{{font-family:sans-serif;max-width:42em;margin:2em auto;line-height:1.5}}
#astro-bookmarklet{{display:inline-block;padding:.4em .8em;border:1px solid #888;border-radius:4px;text-decoration:none}}</style>
</head><body>
<h1>astro-jupyter bookmarklet</h1>
<p id="astro-state">{state}</p>
{link}
<p>On an arXiv abstract page or an ADS abstract page, click it: the paper's identifier
is sent to this Jupyter server ({esc(intake_url)}) and queued for download and parsing.
The bookmarklet can do nothing else.</p>
<p><button id="astro-rotate">{make}</button>
<button id="astro-revoke">Revoke</button></p>
<h2>Recently queued</h2>
{_recent_table(recent or [])}
<script>
(function(){{
var xsrf={_js(xsrf)}, url={_js(token_url)};
function post(body){{return fetch(url,{{method:'POST',credentials:'same-origin',
 headers:{{'X-XSRFToken':xsrf,'Content-Type':'application/json'}},body:JSON.stringify(body)}}).then(function(r){{return r.json();}});}}
document.getElementById('astro-rotate').onclick=function(){{post({{}}).then(function(j){{
 var a=document.getElementById('astro-bookmarklet');a.href=j.bookmarklet;a.hidden=false;
 document.getElementById('astro-state').textContent='New bookmarklet made; drag it to your bookmarks bar (and delete any old one).';}});}};
document.getElementById('astro-revoke').onclick=function(){{post({{revoke:true}}).then(function(){{
 var a=document.getElementById('astro-bookmarklet');a.hidden=true;a.href='#';
 document.getElementById('astro-state').textContent='Revoked: no bookmarklet works now.';}});}};
}})();
</script>
</body></html>"""


handlers = [
    (r"astro/bookmarklet", BookmarkletPageHandler),
    (r"astro/api/bookmarklet/token", BookmarkletTokenHandler),
    (r"astro/api/bookmarklet/intake", BookmarkletIntakeHandler),
]
