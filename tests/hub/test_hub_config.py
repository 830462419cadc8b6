"""deploy/jupyterhub/jupyterhub_config.py loaded as JupyterHub loads it: what reaches every user's server
(the hub-wide variables, the shared library's URL) and what reaches one user's only (their ADS token)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from traitlets.config.loader import PyFileConfigLoader

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "jupyterhub"


def _load(monkeypatch: pytest.MonkeyPatch, **env: str):
    import os

    for name in list(os.environ):  # only what the test sets reaches the config
        if name.startswith(("ASTRO_", "OPENAI_", "LLM_", "ADS_", "JUPYTERHUB_")):
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return PyFileConfigLoader("jupyterhub_config.py", path=str(DEPLOY)).load_config()


def test_hub_wide_settings_go_to_every_server_and_personal_tokens_do_not(monkeypatch: pytest.MonkeyPatch) -> None:
    config = _load(monkeypatch, OPENAI_BASE_URL="http://llm.internal/v1", ASTRO_ALLOWED_MODELS="llama-3*",
                   ASTRO_MAX_RUNS_PER_USER="2", ASTRO_SHARED_LIBRARY_URL="postgresql://astro@db/lib",
                   ASTRO_SHARED_LIBRARY_DIR="/shared/papers", ADS_API_TOKEN="the-admins-own-token")
    environment = config.Spawner.environment.get_value({})
    assert environment == {"OPENAI_BASE_URL": "http://llm.internal/v1", "ASTRO_ALLOWED_MODELS": "llama-3*",
                           "ASTRO_MAX_RUNS_PER_USER": "2", "ASTRO_SHARED_LIBRARY_URL": "postgresql://astro@db/lib",
                           "ASTRO_SHARED_LIBRARY_DIR": "/shared/papers"}
    assert "enable_auth_state" not in config.Authenticator  # no JUPYTERHUB_CRYPT_KEY: the hub still starts


def test_the_ads_token_comes_from_the_users_auth_state(monkeypatch: pytest.MonkeyPatch) -> None:
    config = _load(monkeypatch, JUPYTERHUB_CRYPT_KEY="00" * 32)
    assert config.Authenticator.enable_auth_state is True
    hook = config.Spawner.auth_state_hook
    shared = {"LLM_MODEL": "m"}  # what every spawner starts from
    alice, bob = SimpleNamespace(environment=shared), SimpleNamespace(environment=shared)
    hook(alice, {"ads_token": " alice-token ", "access_token": "the identity provider's"})
    assert alice.environment == {"LLM_MODEL": "m", "ADS_API_TOKEN": "alice-token"}
    assert shared == bob.environment == {"LLM_MODEL": "m"}  # alice's token is in her spawner's dict only
    hook(alice, {})  # the token was taken out of auth_state: gone at the next start
    assert alice.environment == {"LLM_MODEL": "m"}
    hook(bob, None)
    assert bob.environment == {"LLM_MODEL": "m"}
