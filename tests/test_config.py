"""Settings: a traitlets value wins, else the environment variable, else the built-in default."""

from __future__ import annotations

import pytest
from traitlets.config import Config

from astro_jupyter.config import AstroConfig


def test_env_fallbacks_are_read_with_the_settings_type(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASTRO_LLM_TIMEOUT", "42.5")
    monkeypatch.setenv("ASTRO_RERANK_POOL", "7")
    monkeypatch.setenv("ASTRO_RERANK", "no")
    monkeypatch.setenv("LLM_MODEL", "my-model")
    cfg = AstroConfig()
    assert cfg.llm_timeout_secs == 42.5 and cfg.rerank_pool == 7 and cfg.rerank is False
    assert cfg.llm_model == "my-model"


def test_unusable_or_empty_env_values_fall_back_to_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASTRO_RERANK_POOL", "many")
    monkeypatch.setenv("ASTRO_LLM_TIMEOUT", "")
    monkeypatch.setenv("LLM_MODEL", "")
    monkeypatch.delenv("ASTRO_DOWNLOAD_MAX_BYTES", raising=False)
    cfg = AstroConfig()
    assert cfg.rerank_pool == 24 and cfg.llm_timeout_secs == 120.0 and cfg.llm_model == "gpt-4o-mini"
    assert cfg.download_max_bytes == 200 * 1024 * 1024


def test_a_configured_value_beats_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASTRO_MAX_STEPS", "5")
    c = Config()
    c.AstroConfig.max_steps = 9
    assert AstroConfig(config=c).max_steps == 9
    assert AstroConfig().max_steps == 5
