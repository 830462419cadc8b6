"""An IPython shell with ``%load_ext astro_jupyter`` loaded against a private ASTRO_HOME.

The extension reads its config when it is loaded, so tests set the environment (fake
server URLs) first and load through the ``load`` fixture; it is unloaded afterwards,
which also stops the kernel runtime's loop thread.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.testing.globalipapp import start_ipython


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    monkeypatch.setenv("ASTRO_PROJECT_ROOT", str(root))
    monkeypatch.chdir(root)
    return root


@pytest.fixture
def load(project: Path) -> Iterator[Callable[[], Any]]:
    ip = start_ipython() or InteractiveShell.instance()
    loaded: list[Any] = []

    def do_load() -> Any:
        ip.run_line_magic("load_ext", "astro_jupyter")
        loaded.append(ip)
        return ip

    yield do_load
    for shell in loaded:
        shell.run_line_magic("unload_ext", "astro_jupyter")
        for name in ("r", "answer", "p", "target", "n"):
            shell.user_ns.pop(name, None)


@pytest.fixture
def llm_env(openai_server: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("LLM_MODEL", "scripted-model")
    return openai_server
