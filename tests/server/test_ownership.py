"""Sessions and runs belong to the identity that made them (named identities, e.g. JupyterHub users)."""

from __future__ import annotations

from typing import Any

import pytest
from jupyter_server.auth.identity import IdentityProvider, User

from tests.server.conftest import Api

TOKENS = {"alice-secret": "alice", "bob-secret": "bob"}


class TwoUserIdentityProvider(IdentityProvider):
    """Each of two tokens names a user, as JupyterHub or a custom deployment would."""

    async def get_user(self, handler: Any) -> User | None:  # type: ignore[override]
        match = self.auth_header_pat.match(handler.request.headers.get("Authorization", ""))
        if match and match.group(2) in TOKENS:
            handler._token_authenticated = True
            return User(TOKENS[match.group(2)])
        return await super().get_user(handler)


@pytest.fixture
def extra_server_config() -> dict[str, Any]:
    return {"ServerApp": {"identity_provider_class": TwoUserIdentityProvider}}


ALICE = {"Authorization": "token alice-secret"}
BOB = {"Authorization": "token bob-secret"}


async def test_another_identity_gets_404(api: Api, astro_service) -> None:
    status, me = await api("GET", "astro/api/auth/me", headers=ALICE)
    assert status == 200 and me["username"] == "alice" and me["owner"] == "alice"

    status, mine = await api("POST", "astro/api/sessions", body={"title": "alice's quasars"}, headers=ALICE)
    assert status == 201 and mine["owner"] == "alice"
    sid = mine["id"]
    await astro_service.services.messages.append(sid, {"role": "user", "content": "quasar question"})
    await astro_service.services.runs.create("run_alice", sid, owner="alice", prompt="quasar question")

    for method, path, body in (
        ("GET", f"astro/api/sessions/{sid}", None),
        ("PATCH", f"astro/api/sessions/{sid}", {"title": "mine now"}),
        ("DELETE", f"astro/api/sessions/{sid}", None),
        ("GET", f"astro/api/sessions/{sid}/messages", None),
        ("GET", f"astro/api/sessions/{sid}/events", None),
        ("GET", "astro/api/runs/run_alice/events", None),
        ("POST", "astro/api/runs/run_alice/cancel", {}),
        ("POST", "astro/api/runs/run_alice/answers", {"request_id": "r", "answer": "allow"}),
        ("POST", "astro/api/runs", {"prompt": "hi", "session_id": sid}),
    ):
        status, err = await api(method, path, body=body, headers=BOB)
        assert status == 404, (method, path, status, err)
        assert err["reason"] in ("session_not_found", "run_not_found")

    status, listed = await api("GET", "astro/api/sessions", headers=BOB)
    assert sid not in [s["id"] for s in listed["sessions"]]
    status, found = await api("GET", "astro/api/search/history", params={"q": "quasar"}, headers=BOB)
    assert status == 200 and found["results"] == []

    status, found = await api("GET", "astro/api/search/history", params={"q": "quasar"}, headers=ALICE)
    assert {r["session_id"] for r in found["results"]} == {sid}
    status, one = await api("GET", f"astro/api/sessions/{sid}", headers=ALICE)
    assert status == 200 and one["title"] == "alice's quasars"  # bob's PATCH changed nothing

    # rows with no owner (made by the kernel magics or the CLI) are visible to both
    shared = await astro_service.services.sessions.create(title="from a notebook")
    for who in (ALICE, BOB):
        status, _ = await api("GET", f"astro/api/sessions/{shared.id}", headers=who)
        assert status == 200


async def test_each_identity_gets_its_own_demo_session(api: Api) -> None:
    status, alices = await api("POST", "astro/api/sessions/demo", headers=ALICE)
    assert status == 200 and alices["owner"] == "alice"
    status, bobs = await api("POST", "astro/api/sessions/demo", headers=BOB)
    assert status == 200 and bobs["owner"] == "bob" and bobs["id"] != alices["id"]
    status, _ = await api("GET", f"astro/api/sessions/{alices['id']}/events", headers=BOB)
    assert status == 404
    status, mine = await api("POST", "astro/api/sessions/demo", headers=ALICE)
    assert mine["id"] == alices["id"]  # the same one again, not a copy per click
