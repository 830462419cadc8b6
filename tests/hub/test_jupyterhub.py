"""A real JupyterHub (PyPI) with configurable-http-proxy (npm) runs deploy/jupyterhub/jupyterhub_config.py:
two users each start their server through the hub, ask through the REST API with their own hub token, get the
hub-wide settings and their own ADS token, and cannot see the other's sessions, notes, memories or files. Both
servers use one shared paper library on a real PostgreSQL (the store tests' server fixture, tests/hub/conftest.py):
each user adds a paper and finds the other's by search.

Test-only pieces (never in the deployed config): the dummy authenticator, ``SimpleLocalProcessSpawner`` (every
user a directory under the test's tmp dir, all the same Unix user), a service token to drive the hub's API.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.fakes.ads_server import AdsHandler
from tests.fakes.arxiv_server import arxiv_server
from tests.fakes.base import FakeServer
from tests.fakes.file_server import Route, file_server
from tests.fakes.openai_server import FakeOpenAIServer, Turn, last_tool_results

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("jupyterhub")]  # both tests on one worker: one hub, not two

REPO = Path(__file__).resolve().parents[2]
DEPLOY_CONFIG = REPO / "deploy" / "jupyterhub" / "jupyterhub_config.py"
CHP_INSTALL = "npm install --prefix ~/.cache/astro-jupyter-hub configurable-http-proxy"
BIBCODE = "2019ApJ...873..111I"
BOB_BIBCODE = "2012A&A...538A...8S"  # not alice's: a paper already in the shared library is answered without ADS
ALICE_FACT = "Alice measures the M87 jet proper motions with VLBA images at 43 GHz"
PDFS = REPO / "tests" / "data" / "pdfs"
# the papers each user adds to the shared library: an arXiv id (tests/data/arxiv/entries.xml) whose PDF the
# file fake serves, and words of that PDF the other user searches for
SHARED_PAPERS = {"alice": ("2405.00001", "aas_style.pdf", "tidal tails of globular clusters in the outer halo"),
                 "bob": ("2301.01234", "two_column.pdf", "dark matter in dwarf galaxies")}
DEADLINE = 45.0  # seconds for the hub, then for both servers, to come up


def _chp() -> str | None:
    local = Path("~/.cache/astro-jupyter-hub/node_modules/.bin/configurable-http-proxy").expanduser()
    return str(local) if local.exists() else shutil.which("configurable-http-proxy")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never an http_proxy


class Http:
    """JSON over the hub's public address (the proxy), with one hub token."""

    def __init__(self, base: str, token: str) -> None:
        self.base, self.token = base, token

    def __call__(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else (b"" if method in ("POST", "PATCH", "PUT") else None)
        request = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers={"Authorization": f"token {self.token}",
                                                  "Content-Type": "application/json"})
        try:
            with _OPENER.open(request, timeout=30) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        except urllib.error.URLError as exc:  # not listening (yet)
            return 0, str(exc)
        text = raw.decode("utf-8", "replace")
        try:
            return status, json.loads(text) if text.strip() else None
        except ValueError:
            return status, text

    def ask(self, user: str, prompt: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Start a run on ``user``'s server and read its SSE stream to ``done``."""
        status, started = self("POST", f"/user/{user}/astro/api/runs", {"prompt": prompt})
        assert status == 201, (status, started)
        status, stream = self("GET", f"/user/{user}/astro/api/runs/{started['run_id']}/events")
        assert status == 200, (status, stream)
        events = [json.loads(line[5:]) for line in stream.splitlines() if line.startswith("data:")]
        assert events and events[-1]["type"] == "done", events[-3:]
        return started, events


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"  # a zombie the hub has yet to reap


def _wait(check: Any, what: str, log: Path) -> Any:
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what} within {DEADLINE:g} s; hub log:\n{log.read_text()[-4000:]}")


def _responder(body: dict[str, Any]) -> Turn:
    """The scripted model: the prompt says which tool to call; after a tool result, repeat it."""
    results = last_tool_results(body)
    if results:
        return Turn.say("Tool said: " + " | ".join(str(r.get("content"))[:300] for r in results))
    if not body.get("tools"):  # a tool's own call (rag_search's re-ranking and answer), not the agent's turn
        return Turn.say("The first passage answers it [1].")
    prompt = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
    if "search " in prompt:
        return Turn.call("rag_search", {"query": prompt.split("search ", 1)[1].strip()})
    if "remember" in prompt:
        return Turn.call("save_memory", {"content": ALICE_FACT, "category": "project"})
    if "metadata" in prompt:
        return Turn.call("get_paper_metadata", {"paper_id": BOB_BIBCODE if "BOB" in prompt else BIBCODE})
    if "read " in prompt:
        return Turn.call("read_file", {"path": prompt.split("read ", 1)[1].strip()})
    return Turn.say("Hello.")


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory, pg_server: Any) -> Iterator[dict[str, Any]]:
    chp = _chp()
    if chp is None:
        pytest.skip(f"configurable-http-proxy is not installed: {CHP_INSTALL}")
    pytest.importorskip("jupyterhub", reason="jupyterhub is not installed (the test extra has it)")
    tmp = tmp_path_factory.mktemp("hub")
    llm = FakeOpenAIServer(responder=_responder).start()
    ads = FakeServer(AdsHandler, state={"token": "alice-ads-token"}).start()
    arxiv = arxiv_server().start()
    files = file_server().start()
    files.state["routes"] = {f"/pdf/{arxiv_id}": Route((PDFS / pdf).read_bytes())
                             for arxiv_id, pdf, _ in SHARED_PAPERS.values()}
    shared_library = pg_server.create_database(f"hub_{secrets.token_hex(4)}")
    public, api_port, hub_port = _free_port(), _free_port(), _free_port()
    service_token = secrets.token_hex(16)
    (tmp / "jupyterhub_config.py").write_text(f"""
load_subconfig({str(DEPLOY_CONFIG)!r})
# test only: anyone logs in, every user is a directory, all run as this Unix user
c.JupyterHub.authenticator_class = "dummy"
c.Authenticator.allowed_users = {{"alice", "bob"}}
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = {str(tmp / "home" / "{username}")!r}
c.Spawner.cmd = [{sys.executable!r}, "-m", "jupyterhub.singleuser"]
c.Spawner.args = ["--allow-root"] + [f"--ServerApp.jpserver_extensions={{name}}=False"  # a faster start
    for name in ("jupyterlab", "jupyter_lsp", "jupyter_server_terminals", "notebook_shim", "jupyter_server_mcp")]
c.Spawner.default_url = "/astro/api/auth/me"
c.Spawner.interrupt_timeout = c.Spawner.term_timeout = 2  # at the end: SIGINT, SIGTERM, then SIGKILL
c.JupyterHub.tornado_settings = {{"slow_spawn_timeout": 0, "slow_stop_timeout": 0}}  # POST, DELETE .../server answers at once: both start together
c.Spawner.start_timeout = c.Spawner.http_timeout = {int(DEADLINE)}
c.JupyterHub.bind_url = "http://127.0.0.1:{public}"
c.JupyterHub.hub_bind_url = "http://127.0.0.1:{hub_port}"
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{api_port}"
c.ConfigurableHTTPProxy.command = [{chp!r}]
c.JupyterHub.db_url = "sqlite:///{tmp / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = {str(tmp / "cookie_secret")!r}
c.JupyterHub.services = [{{"name": "astro-test", "api_token": {service_token!r}}}]
c.JupyterHub.load_roles = [{{"name": "astro-test", "services": ["astro-test"],
    "scopes": ["admin:users", "admin:servers", "admin:server_state", "tokens", "admin:auth_state"]}}]
# test only: PDFs come from the loopback file fake
c.Spawner.environment.update({{"ASTRO_ARXIV_PDF_URL": "{files.url}/pdf", "ASTRO_DOWNLOAD_ALLOWED_HOSTS": "127.0.0.1"}})
""")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ASTRO_", "OPENAI_", "LLM_", "ADS_"))}
    env.update({
        "OPENAI_BASE_URL": llm.url, "OPENAI_API_KEY": "hub-wide-key", "LLM_MODEL": "gpt-4o-mini",
        "ASTRO_ALLOWED_MODELS": "gpt-4o*", "ASTRO_MAX_RUNS_PER_USER": "2", "ASTRO_MAX_STEPS": "4",
        "ASTRO_PERMISSION_RULES": json.dumps([{"action": "deny", "tool": "run_bash", "reason": "not on this hub"}]),
        "ASTRO_ADS_URL": ads.url, "ASTRO_ARXIV_URL": f"{arxiv.url}/api/query", "ASTRO_EMBED_MODEL": "lexical",
        "ASTRO_SHARED_LIBRARY_URL": shared_library, "ASTRO_SHARED_LIBRARY_DIR": str(tmp / "shared-papers"),
        "JUPYTERHUB_CRYPT_KEY": secrets.token_hex(32), "PYTHONPATH": str(REPO),
    })
    log = tmp / "hub.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "jupyterhub", "-f", str(tmp / "jupyterhub_config.py")],
                                cwd=tmp, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{public}"
    admin = Http(base, service_token)
    pids: list[int] = []
    try:
        _wait(lambda: proc.poll() is None and admin("GET", "/hub/api/")[0] == 200, "the hub answers", log)
        for user in ("alice", "bob"):  # the per-user secret, as an authenticator's post_auth_hook would store it
            status, _ = admin("PATCH", f"/hub/api/users/{user}", {"auth_state": {"ads_token": f"{user}-ads-token"}})
            assert status == 200
            status, _ = admin("POST", f"/hub/api/users/{user}/server")
            assert status in (201, 202), status

        def ready() -> bool:
            return all((admin("GET", f"/hub/api/users/{u}")[1]["servers"].get("") or {}).get("ready")
                       for u in ("alice", "bob"))

        _wait(ready, "both users' servers are ready", log)
        tokens = {}
        for user in ("alice", "bob"):
            status, made = admin("POST", f"/hub/api/users/{user}/tokens", {"note": "astro test", "expires_in": 600})
            assert status == 201, made
            tokens[user] = made["token"]
        for user in ("alice", "bob"):
            pids.append(int(admin("GET", f"/hub/api/users/{user}")[1]["servers"][""]["state"]["pid"]))
        yield {"base": base, "tokens": tokens, "llm": llm, "ads": ads, "home": tmp / "home", "log": log}
    finally:
        for user in ("alice", "bob"):  # the hub stops each server (SIGINT, SIGTERM, SIGKILL: Spawner timeouts)
            admin("DELETE", f"/hub/api/users/{user}/server")
        _wait(lambda: all(not _alive(pid) for pid in pids), "the users' servers stopped", log)
        if proc.poll() is None:
            proc.terminate()  # the hub stops the users' servers and its proxy (cleanup_servers)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait()
        llm.stop()
        ads.stop()
        arxiv.stop()
        files.stop()


def test_two_users_each_on_their_own_server_see_only_their_own_work(hub: dict[str, Any]) -> None:
    alice, bob = (Http(hub["base"], hub["tokens"][u]) for u in ("alice", "bob"))
    llm, ads = hub["llm"], hub["ads"]

    # each user's own identity, through the hub's proxy and their own token
    assert alice("GET", "/user/alice/astro/api/auth/me")[1]["username"] == "alice"
    assert bob("GET", "/user/bob/astro/api/auth/me")[1]["username"] == "bob"
    # a user's token does not open the other's server
    status, _ = bob("GET", "/user/alice/astro/api/sessions")
    assert status == 403

    # hub-wide settings reached both servers: the endpoint, the model limit, the permission rules
    assert alice("GET", "/user/alice/astro/api/models")[1]["current"] == "gpt-4o-mini"
    status, err = bob("PUT", "/user/bob/astro/api/models/current", {"model": "chain-a"})
    assert status == 403 and err["reason"] == "model_not_allowed" and "gpt-4o*" in err["message"]

    # alice works: a memory, a note, an ADS lookup with her own token
    first, events = alice.ask("alice", "ALICE remember my project")
    saved = [e for e in events if e["type"] == "tool_result" and e["name"] == "save_memory"]
    assert saved and not saved[0]["is_error"], events
    status, paper = alice("POST", "/user/alice/astro/api/papers", {"identifier": BIBCODE, "download": False})
    assert status in (200, 201), paper
    status, note = alice("POST", "/user/alice/astro/api/notes",
                         {"paper_id": paper["id"], "comment": "ALICE private note on M87"})
    assert status in (200, 201), note
    _, events = alice.ask("alice", "ALICE metadata please")
    assert [e for e in events if e["type"] == "tool_result" and not e["is_error"]], events
    auth = {r.headers.get("Authorization") for r in ads.requests}
    assert auth == {"Bearer alice-ads-token"}, auth
    (hub["home"] / "alice" / "obs-plan.txt").write_text("ALICE observing plan: M87 at 43 GHz")

    # bob: his own ADS token, none of alice's sessions, notes, memories or files
    _, events = bob.ask("bob", "BOB metadata please")
    assert {r.headers.get("Authorization") for r in ads.requests} == {"Bearer alice-ads-token", "Bearer bob-ads-token"}
    status, sessions = bob("GET", "/user/bob/astro/api/sessions")
    assert status == 200 and first["session_id"] not in json.dumps(sessions)
    status, _ = bob("GET", f"/user/bob/astro/api/sessions/{first['session_id']}/messages")
    assert status == 404
    status, notes = bob("GET", "/user/bob/astro/api/notes")
    assert status == 200 and "ALICE private note" not in json.dumps(notes)
    status, found = bob("GET", "/user/bob/astro/api/search/history?q=remember")
    assert status == 200 and found["results"] == []
    _, events = bob.ask("bob", f"BOB read {hub['home'] / 'alice' / 'obs-plan.txt'}")
    read = [e for e in events if e["type"] == "tool_result" and e["name"] == "read_file"]
    assert read and read[0]["is_error"] and "observing plan" not in read[0]["output"], read

    # the model saw alice's memory in her next run, and never in any of bob's
    alice.ask("alice", "ALICE hello again")
    alice_prompts = [json.dumps(r["messages"]) for r in llm.chat_requests if "ALICE" in json.dumps(r["messages"])]
    bob_prompts = [json.dumps(r["messages"]) for r in llm.chat_requests if "BOB" in json.dumps(r["messages"])]
    assert ALICE_FACT in alice_prompts[-1]
    assert bob_prompts and not any(ALICE_FACT in p or "observing plan" in p for p in bob_prompts)

    # alice's own work is all there for her
    status, sessions = alice("GET", "/user/alice/astro/api/sessions")
    assert first["session_id"] in json.dumps(sessions)
    status, notes = alice("GET", "/user/alice/astro/api/notes")
    assert "ALICE private note" in json.dumps(notes)
    status, found = alice("GET", "/user/alice/astro/api/search/history?q=remember")
    assert status == 200 and found["results"], found


def test_both_users_add_papers_to_the_shared_library_and_find_each_others(hub: dict[str, Any]) -> None:
    users = {u: Http(hub["base"], hub["tokens"][u]) for u in ("alice", "bob")}
    added = {}
    for user, (arxiv_id, _, _) in SHARED_PAPERS.items():  # each adds a paper; their server downloads and parses it
        status, paper = users[user]("POST", f"/user/{user}/astro/api/papers", {"identifier": f"arXiv:{arxiv_id}"})
        assert status == 201 and paper["intake_id"], paper
        added[user] = paper["id"]
    for user, paper_id in added.items():
        path = f"/user/{user}/astro/api/papers/{urllib.parse.quote(paper_id, safe='')}"
        _wait(lambda: users[user]("GET", path)[1].get("state") == "parsed", f"{user}'s paper parsed", hub["log"])

    # one library: each sees both papers, with who added them
    for user, http in users.items():
        status, listing = http("GET", f"/user/{user}/astro/api/papers")
        by_id = {p["id"]: p for p in listing["papers"]}
        assert status == 200 and {by_id[added[u]]["added_by"] for u in added} == {"alice", "bob"}, listing

    # each finds the other's paper by searching, through their own server and token
    searches = {}
    for user, other in (("bob", "alice"), ("alice", "bob")):
        started, events = users[user].ask(user, f"{user.upper()} search {SHARED_PAPERS[other][2]}")
        found = [e for e in events if e["type"] == "tool_result" and e["name"] == "rag_search"]
        assert found and not found[0]["is_error"], events
        hits = found[0]["metadata"]["hits"]
        assert hits and hits[0]["paper_id"] == added[other], hits
        searches[user] = started["session_id"]

    # the papers are shared, the work is not: neither sees the other's search session or its tool results
    for user, other in (("bob", "alice"), ("alice", "bob")):
        status, _ = users[user]("GET", f"/user/{user}/astro/api/sessions/{searches[other]}/messages")
        assert status == 404
        status, sessions = users[user]("GET", f"/user/{user}/astro/api/sessions")
        assert status == 200 and searches[other] not in json.dumps(sessions)
        status, found = users[user]("GET", f"/user/{user}/astro/api/search/history?q=search")
        assert status == 200 and all(searches[other] not in json.dumps(r) for r in found["results"]), found
