"""Settings: a traitlets value wins, else the environment variable, else the built-in default; only what a
person sets is a setting (internal tuning lives in value objects next to its code, tests pass them in)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from traitlets import TraitError
from traitlets.config import Config

from astro_jupyter.config import SERVICE_URLS, AstroConfig

TESTS = Path(__file__).resolve().parent


def test_env_fallbacks_are_read_with_the_settings_type(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASTRO_LLM_TIMEOUT", "42.5")
    monkeypatch.setenv("ASTRO_DOWNLOAD_MAX_BYTES", "7")
    monkeypatch.setenv("LLM_MODEL", "my-model")
    cfg = AstroConfig()
    assert cfg.llm_timeout_secs == 42.5 and cfg.download_max_bytes == 7
    assert cfg.llm_model == "my-model"


def test_unusable_or_empty_env_values_fall_back_to_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASTRO_DOWNLOAD_MAX_BYTES", "many")
    monkeypatch.setenv("ASTRO_LLM_TIMEOUT", "")
    monkeypatch.setenv("LLM_MODEL", "")
    cfg = AstroConfig()
    assert cfg.download_max_bytes == 200 * 1024 * 1024 and cfg.llm_timeout_secs == 120.0
    assert cfg.llm_model == "gpt-4o-mini"


def test_a_configured_value_beats_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASTRO_MAX_STEPS", "5")
    c = Config()
    c.AstroConfig.max_steps = 9
    assert AstroConfig(config=c).max_steps == 9
    assert AstroConfig().max_steps == 5


def test_a_setting_that_does_not_exist_is_an_error_not_ignored() -> None:
    """traitlets drops unknown keyword arguments with a warning: a removed setting would pass silently."""
    with pytest.raises(TypeError, match="no setting llm_retry_base_delay"):
        AstroConfig(llm_retry_base_delay=0.01)


def test_service_urls_replace_only_the_addresses_given(monkeypatch: pytest.MonkeyPatch) -> None:
    builtin = AstroConfig().service_urls
    assert builtin == {name: url for name, (_, url) in SERVICE_URLS.items()}
    mine = AstroConfig(service_urls={"sesame": "http://127.0.0.1:8080/sesame"})
    assert mine.sesame_url == "http://127.0.0.1:8080/sesame"
    assert (mine.ads_url, mine.arxiv_url, mine.arxiv_pdf_url, mine.doi_resolver_url) == (
        builtin["ads"], builtin["arxiv"], builtin["arxiv_pdf"], builtin["doi"])
    monkeypatch.setenv("ASTRO_DOI_URL", "https://doi.example.org")  # one variable per service
    assert AstroConfig().doi_resolver_url == "https://doi.example.org"
    assert AstroConfig(service_urls={"ads": "https://ads.example.org"}).doi_resolver_url == "https://doi.example.org"
    with pytest.raises(TraitError, match="unknown service 'simbad'"):
        AstroConfig(service_urls={"simbad": "https://example.org"})
    with pytest.raises(TraitError, match="must be an http"):
        AstroConfig(service_urls={"ads": "file:///etc/passwd"})


def test_at_most_30_settings() -> None:
    """Issue 23 item 4: at most 30 user-facing settings; internal tuning is no trait."""
    assert len(AstroConfig.class_traits(config=True)) <= 30


def test_every_setting_is_named_by_a_test_that_uses_it() -> None:
    """Each setting appears in a test besides this file and the README check (one that shows it takes effect)."""
    sources = {p: p.read_text(encoding="utf-8") for p in TESTS.rglob("test_*.py")
               if p.name not in ("test_config.py", "test_readme.py")}
    unnamed = [name for name in AstroConfig.class_traits(config=True)
               if not any(re.search(rf"\b{name}\b", text) for text in sources.values())]
    assert unnamed == []
