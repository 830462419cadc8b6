"""UI tests: a real ``jupyter lab`` (subprocess) with the astro extensions, driven by headless
Chromium through Python Playwright.

One lab per test session (it takes seconds to start), reached through a TCP proxy so a test
can make the server go away. The LLM is the scripted fake (tests/fakes/openai_server.py) and
CDS Sesame the fake resolver, both real HTTP servers on loopback in this process; each test
scripts the turns it needs. Screenshots go to test-artifacts/ui/.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.sesame_server import FakeSesameServer

from .proxy import TcpProxy

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts" / "ui"
CHROMIUM = os.environ.get("ASTRO_UI_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Tool outputs up to this size stay inline (the 1 MB test); larger ones are persisted to a file.
MAX_OUTPUT_CHARS = 1_200_000
LLM_PRICES = {"gpt-4o-mini": {"input": 0.15, "output": 0.6}}  # USD per million tokens

pytestmark = pytest.mark.browser
PANEL = "#astro-jupyter-panel"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/ui/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.browser)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lab:
    """The running lab: ``url`` goes through the proxy; ``api(...)`` calls the REST routes directly."""

    def __init__(self, proc: subprocess.Popen, port: int, proxy: TcpProxy, token: str, root: Path, home: Path, log: Path):
        self.proc = proc
        self.port = port
        self.proxy = proxy
        self.token = token
        self.root = root
        self.home = home
        self.log = log

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.proxy.port}"

    def api(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/{path.lstrip('/')}",
            data=data,
            method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else None

    def log_tail(self, n: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return ""


@pytest.fixture(autouse=True)
def jp_asyncio_loop() -> None:
    """pytest-jupyter's autouse loop fixture would close the loop Playwright's sync API runs on;
    these tests use no in-process Jupyter server, so there is no loop to provide."""
    return None


@pytest.fixture(autouse=True)
def jp_server_cleanup() -> None:
    """No in-process ServerApp to clean up here (the lab is a subprocess)."""
    return None


@pytest.fixture(scope="package")
def llm() -> Iterator[FakeOpenAIServer]:
    server = FakeOpenAIServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="package")
def sesame() -> Iterator[FakeSesameServer]:
    server = FakeSesameServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="package")
def tap_port() -> int:
    """The loopback port of the lab's TAP service ``local``: named in the lab's config from the start,
    served (by GAVO DaCHS) only once a test asks for ``tap``."""
    return _free_port()


@pytest.fixture(scope="package")
def tap(tap_port: int) -> Iterator[Any]:
    """A real TAP server (GAVO DaCHS, tests/fakes/dachs.py) at the lab's service ``local``; skips when
    DaCHS cannot run here."""
    from tests.fakes.dachs import DachsServer, DachsUnavailable

    try:
        server = DachsServer(port=tap_port).start()
    except DachsUnavailable as exc:
        pytest.skip(str(exc))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="package")
def lab(tmp_path_factory: pytest.TempPathFactory, llm: FakeOpenAIServer, sesame: FakeSesameServer, tap_port: int) -> Iterator[Lab]:
    yield from _run_lab(tmp_path_factory, {
        "OPENAI_BASE_URL": llm.url,
        "OPENAI_API_KEY": "sk-fake",
        "LLM_MODEL": "gpt-4o-mini",
        "LLM_FALLBACK_MODEL": "fallback-model",
        "ASTRO_SESAME_URL": sesame.url,
        "ASTRO_TAP_SERVICES": json.dumps({"local": f"http://127.0.0.1:{tap_port}/tap"}),
    })


@pytest.fixture(scope="package")
def lab_no_llm(tmp_path_factory: pytest.TempPathFactory, sesame: FakeSesameServer) -> Iterator[Lab]:
    """A second lab with no LLM endpoint at all (no OPENAI_*/LLM_* set): what a newcomer sees first.
    Started only by the tests that ask for it."""
    yield from _run_lab(tmp_path_factory, {"ASTRO_SESAME_URL": sesame.url})


def _run_lab(tmp_path_factory: pytest.TempPathFactory, llm_env: dict[str, str]) -> Iterator[Lab]:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"Chromium not found at {CHROMIUM} (apt-get install chromium; .ci/run does)")
    jupyter = shutil.which("jupyter")
    if jupyter is None:
        pytest.skip("jupyter is not on PATH")
    base = tmp_path_factory.mktemp("ui")
    root = base / "root"
    home = root / "astro_home"  # inside the Jupyter root so persisted outputs can be opened
    root.mkdir()
    token = uuid.uuid4().hex
    port = _free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "LLM_", "ASTRO_", "ADS_", "JUPYTER_"))
    }
    env.update(
        {
            "ASTRO_HOME": str(home),
            "ASTRO_PROJECT_ROOT": str(root),
            **llm_env,
            "ASTRO_LLM_PRICES": json.dumps(LLM_PRICES),  # answers show their cost (tests/ui/test_costs.py)
            "HF_HUB_OFFLINE": "1",
            "JUPYTER_CONFIG_DIR": str(base / "jupyter_config"),
            "JUPYTERLAB_SETTINGS_DIR": str(base / "lab_settings"),
            "JUPYTERLAB_WORKSPACES_DIR": str(base / "lab_workspaces"),
            "JUPYTER_RUNTIME_DIR": str(base / "runtime"),
        }
    )
    if os.environ.get("ASTRO_UI_JUPYTER_PATH"):  # test a worktree's build without repointing the shared symlink
        env["JUPYTER_PATH"] = os.environ["ASTRO_UI_JUPYTER_PATH"]
    # No "Would you like to receive official Jupyter news?" toast.
    settings = base / "lab_settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
    # internal tuning (no settings), handed to the extension as a Python object: quick retries, and
    # outputs persisted only above MAX_OUTPUT_CHARS
    tuning = base / "tuning_config.py"
    tuning.write_text(
        "from astro_jupyter.agent.executor import ToolLimits\n"
        "from astro_jupyter.llm.client import LlmLimits\n"
        "from astro_jupyter.services.container import Tuning\n"
        "c.ServerApp.tornado_settings = {'astro_tuning': Tuning(llm=LlmLimits(retry_base_delay=0.05), "
        f"tools=ToolLimits(max_output_chars={MAX_OUTPUT_CHARS}))}}\n"
    )
    log = base / "lab.log"
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "jupyterlab",
            "--allow-root", "--no-browser",
            f"--port={port}", "--ip=127.0.0.1",
            f"--ServerApp.token={token}",
            f"--ServerApp.root_dir={root}",
            "--ServerApp.port_retries=0",
            "--LabApp.news_url=",
            f"--config={tuning}",
        ],
        cwd=root,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    proxy = TcpProxy(port).start()
    the_lab = Lab(proc, port, proxy, token, root, home, log)
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"jupyter lab exited with {proc.returncode}:\n{the_lab.log_tail()}")
            try:
                the_lab.api("GET", "astro/api/auth/me")
                break
            except Exception:  # noqa: BLE001 - not up yet
                if time.monotonic() > deadline:
                    pytest.fail(f"jupyter lab did not answer astro/api/auth/me within 60 s:\n{the_lab.log_tail()}")
                time.sleep(0.3)
        yield the_lab
    finally:
        proxy.close()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"Chromium not found at {CHROMIUM}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def script(llm: FakeOpenAIServer) -> Iterator[FakeOpenAIServer]:
    """The fake LLM, emptied before and after the test (turns and responder)."""
    with llm.lock:
        llm.turns.clear()
        llm.chat_requests.clear()
    llm.responder = None
    yield llm
    with llm.lock:
        llm.turns.clear()
    llm.responder = None


@pytest.fixture
def page(browser: Any, lab: Lab, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh browser context on the lab with the Astro panel open on a new session."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    pg = context.new_page()
    errors: list[str] = []
    console: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
    pg.on("requestfailed", lambda r: console.append(f"requestfailed: {r.method} {r.url} {r.failure}"))
    pg.on("response", lambda r: console.append(f"http {r.status}: {r.request.method} {r.url}") if r.status >= 400 else None)
    pg.set_default_timeout(20_000)
    pg.goto(f"{lab.url}/lab?reset&token={lab.token}")  # default layout, whatever the last test left open
    open_panel(pg)
    pg.astro_errors = errors  # type: ignore[attr-defined]
    try:
        yield pg
    finally:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        failed = getattr(request.node, "rep_call", None)
        if failed is not None and failed.failed:
            print("\n--- browser console ---\n" + "\n".join(console[-60:]) + "\n--- page errors ---\n" + "\n".join(errors))
            with_suffix = ARTIFACTS / f"{request.node.name}-FAILED.png"
            try:
                pg.screenshot(path=str(with_suffix))
            except Exception:  # noqa: BLE001 - best effort
                pass
        context.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Iterator[None]:
    outcome = yield
    rep = outcome.get_result()
    setattr(item, f"rep_{rep.when}", rep)


def open_panel(pg: Any) -> None:
    """Wait for the lab, click the Astro tab in the left sidebar."""
    pg.wait_for_selector("#jp-main-dock-panel", state="attached", timeout=60_000)
    tab = pg.locator('.jp-SideBar.jp-mod-left li[data-id="astro-jupyter-panel"]')
    tab.wait_for(timeout=30_000)
    prompt = pg.locator("#astro-jupyter-panel .jp-Astro-prompt")
    # The layout restorer may still be toggling sidebars: click until the panel stays open.
    for _ in range(20):
        if prompt.is_visible():
            pg.wait_for_timeout(300)
            if prompt.is_visible():
                break
            continue
        if "lm-mod-current" not in (tab.get_attribute("class") or ""):
            tab.click()
        pg.wait_for_timeout(300)
    prompt.wait_for(state="visible")


def document_tab(pg: Any, name: str) -> Any:
    """The main area's tab of the document called ``name``."""
    return pg.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text=name).first


def document_panel(pg: Any, name: str) -> Any:
    """The main-area panel of the document ``name``, found through its tab's ``data-id`` (as JupyterLab's galata
    does): a tree URL also restores the saved workspace, so another test's document may be open, hidden, first."""
    tab = document_tab(pg, name)
    tab.wait_for()
    return pg.locator(f'#{tab.get_attribute("data-id")}')


def shot(pg: Any, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    pg.screenshot(path=str(path))
    return path


def current_session(pg: Any) -> str:
    """The id of the session the panel shows ('' for a new, unsaved chat)."""
    return pg.locator(PANEL).get_attribute("data-session-id") or ""


def new_session(pg: Any) -> None:
    before = current_session(pg)
    pg.locator(f"{PANEL} .jp-Astro-new").click()
    pg.wait_for_function(
        """before => {
            const p = document.querySelector('#astro-jupyter-panel');
            const v = p.dataset.sessionId || '';
            return v !== '' && v !== before && !p.dataset.loading;
        }""",
        arg=before,
    )


def open_sessions(pg: Any) -> Any:
    """Show the Sessions view (list + search); returns its locator."""
    view = pg.locator(f"{PANEL} .jp-Astro-sessions")
    if not view.is_visible():
        pg.locator(f"{PANEL} .jp-Astro-sessions-button").click()
    view.wait_for(state="visible")
    return view


def select_session(pg: Any, session_id: str) -> None:
    """Open a session from the Sessions view and wait until it is shown."""
    view = open_sessions(pg)
    if view.locator(".jp-Astro-search-input").input_value():
        view.locator(".jp-Astro-search-input").fill("")  # a search filters the list
    view.locator(f'.jp-Astro-session-item[data-session-id="{session_id}"]').click()
    pg.wait_for_function(
        """sid => {
            const p = document.querySelector('#astro-jupyter-panel');
            return p.dataset.sessionId === sid && !p.dataset.loading;
        }""",
        arg=session_id,
    )


def more_menu(pg: Any, item: str) -> None:
    """Click an entry of the toolbar's "…" menu."""
    pg.locator(f"{PANEL} .jp-Astro-more-menu").click()
    menu = pg.locator(".lm-Menu.jp-Astro-menu").last
    menu.wait_for()
    menu.locator(".lm-Menu-item", has_text=item).first.click()


def expand_tool(pg: Any, call_id: str) -> Any:
    """Open a tool line (arguments and result); returns the tool's locator."""
    tool = pg.locator(f'{PANEL} .jp-Astro-tool[data-tool-call-id="{call_id}"]')
    line = tool.locator(":scope > .jp-Astro-tool-line")
    if line.get_attribute("aria-expanded") != "true":
        line.click()
    return tool


def send(pg: Any, text: str) -> None:
    prompt = pg.locator("#astro-jupyter-panel .jp-Astro-prompt")
    prompt.fill(text)
    prompt.press("Enter")


def run_status(pg: Any) -> str:
    return pg.locator("#astro-jupyter-panel").get_attribute("data-run-status") or ""


def wait_done(pg: Any, timeout: float = 30_000) -> None:
    pg.wait_for_function(
        "() => ['done','error'].includes(document.querySelector('#astro-jupyter-panel').dataset.runStatus)",
        timeout=timeout,
    )
    settle(pg)


def settle(pg: Any) -> None:
    """Wait until every streamed Markdown block shows its final text."""
    pg.wait_for_function("() => document.querySelector('#astro-jupyter-panel [data-pending]') === null")
