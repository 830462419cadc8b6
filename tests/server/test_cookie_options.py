"""The recommended login cookie (HttpOnly + SameSite=Strict, applied by the extension) still
lets JupyterLab log in.

Runs a real ``jupyter lab`` with the repository's enable file
(``jupyter-config/jupyter_server_config.d/astro_jupyter.json``) in its user config dir, logs in
through the login form with httpx2 (cookie jar, XSRF), and, when Chromium and Playwright are
present, in a real browser with the token URL.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import httpx2
import pytest

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "jupyter-config" / "jupyter_server_config.d" / "astro_jupyter.json"
TOKEN = "cookie-test-token"

pytestmark = pytest.mark.slow


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[str]:
    config_dir = tmp_path / "jupyter-config"
    (config_dir / "jupyter_server_config.d").mkdir(parents=True)
    shutil.copy(SHIPPED, config_dir / "jupyter_server_config.d" / SHIPPED.name)
    port = _port()
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(config_dir), "ASTRO_HOME": str(tmp_path / "astro"),
           "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", f"--port={port}", "--ip=127.0.0.1",
         f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={tmp_path}"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx2.get(f"{base}/api/status", headers={"Authorization": f"token {TOKEN}"}).status_code == 200:
                    break
            except httpx2.TransportError:
                pass
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else "jupyter lab exited"
            time.sleep(0.2)
        else:
            raise AssertionError("jupyter lab did not start within 60 s")
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_login_form_sets_a_strict_httponly_cookie_and_lab_works(lab: str) -> None:
    with httpx2.Client(base_url=lab, follow_redirects=False) as client:
        client.get("/login")
        xsrf = client.cookies.get("_xsrf")
        assert xsrf
        response = client.post("/login", data={"password": TOKEN, "_xsrf": xsrf})
        assert response.status_code == 302
        login = [c for c in response.headers.get_list("set-cookie") if c.startswith("username-")]
        assert login, response.headers
        attributes = login[0].lower()
        assert "httponly" in attributes and "samesite=strict" in attributes

        page = client.get("/lab")
        assert page.status_code == 200 and "jupyter-config-data" in page.text
        me = client.get("/astro/api/auth/me")
        assert me.status_code == 200 and me.json()["username"]
        created = client.post("/astro/api/sessions", json={"title": "from the browser"}, headers={"X-XSRFToken": xsrf})
        assert created.status_code == 201
        refused = client.post("/astro/api/sessions", json={"title": "no xsrf"})
        assert refused.status_code == 403


@pytest.mark.browser
@pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="chromium is not installed")
def test_lab_logs_in_with_the_token_url_in_chromium(lab: str) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path="/usr/bin/chromium",
            args=["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"],
        )
        try:
            page = browser.new_page()
            page.goto(f"{lab}/lab?token={TOKEN}")
            page.wait_for_selector("#jp-main-dock-panel", timeout=60_000)
            status = page.evaluate("fetch('astro/api/auth/me'.replace(/^/, '/')).then(r => r.status)")
            assert status == 200
            assert "username-" not in page.evaluate("document.cookie")  # HttpOnly: scripts cannot read it
            cookies = [c for c in page.context.cookies() if c["name"].startswith("username-")]
            assert cookies and cookies[0]["sameSite"] == "Strict" and cookies[0]["httpOnly"]
            # a reload navigates with the cookie alone (the token is gone from the URL)
            page.goto(f"{lab}/lab")
            page.wait_for_selector("#jp-main-dock-panel", timeout=60_000)
            assert "/login" not in page.url
        finally:
            browser.close()
