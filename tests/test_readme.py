"""The README is the newcomer's contract: its commands are what CI runs, its table is the config."""

from __future__ import annotations

import re
from pathlib import Path

from astro_jupyter.config import AstroConfig

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _three_commands() -> list[str]:
    block = README.split("## Three commands", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    return [line.split("#", 1)[0].strip() for line in block.strip().splitlines()]


def test_ci_runs_the_readme_install_and_test_commands() -> None:
    install, main_job, test = _three_commands()
    assert main_job == "jupyter lab"
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert f"python -m {install}" in ci or install in ci
    assert ci[-1] == test, "the last step of .ci/run must be exactly the README's test command"


def test_every_setting_is_documented() -> None:
    documented = set(re.findall(r"^\| `(\w+)` \|", README, flags=re.M))
    traits = set(AstroConfig.class_traits(config=True))
    assert traits - documented == set(), "run python scripts/config_table.py and paste it into README.md"
    assert documented - traits == set(), "the README documents settings that no longer exist"
