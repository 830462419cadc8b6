"""The README is the newcomer's contract: its commands are what CI runs, its table is the config."""

from __future__ import annotations

import ast
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


def _marked_browser(node: ast.AST) -> bool:
    decorators = getattr(node, "decorator_list", [])
    return any("browser" in ast.unparse(d) for d in decorators)


def test_the_fast_command_leaves_out_every_browser_test() -> None:
    """The README names how long the suite takes and the fast part; `-m "not browser"` must then really
    leave out every test that starts Chromium (issue 24 item 13)."""
    assert 'python -m pytest -m "not browser"' in README
    assert re.search(r"whole suite takes about \d+ minutes", README)
    unmarked = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        if "ui" in path.relative_to(ROOT / "tests").parts or path == Path(__file__).resolve():
            continue  # tests/ui/conftest.py marks everything there; this test only names the words
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module_marked = any(isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in n.targets)
                            and "browser" in ast.unparse(n.value) for n in tree.body)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
                source = ast.unparse(node).lower()
                if ("playwright" in source or "chromium" in source) and not (module_marked or _marked_browser(node)):
                    unmarked.append(f"{path.relative_to(ROOT)}::{node.name}")
    assert unmarked == [], "mark these @pytest.mark.browser"
