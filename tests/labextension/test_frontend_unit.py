"""Runs the sidebar's Vitest suite (labextension/test/) so `python -m pytest` covers the front end.

The suite tests the SSE client (reconnect, Last-Event-ID resume, no duplicates) and the
timeline model (matching by tool_call_id, subagent nesting, out-of-order results, dedupe).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

LABEXT = Path(__file__).resolve().parents[2] / "labextension"


def test_vitest_suite_passes() -> None:
    if not (LABEXT / "node_modules" / "vitest").is_dir():
        pytest.skip(f"{LABEXT}/node_modules is absent: run `npm install` in labextension/ (pip install -e . does it)")
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not on PATH")
    env = {**os.environ, "CI": "true", "NO_COLOR": "1", "FORCE_COLOR": "0"}
    proc = subprocess.run(
        [npm, "test", "--silent", "--", "--reporter=verbose"],
        cwd=LABEXT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"vitest failed (exit {proc.returncode}):\n{output[-6000:]}"
    match = re.search(r"Tests\s+(\d+) passed", output)
    assert match, f"no vitest summary in output:\n{output[-3000:]}"
    assert int(match.group(1)) >= 20, f"fewer front-end tests ran than expected:\n{output[-3000:]}"
    assert "failed" not in output.split("Tests", 1)[-1].splitlines()[0]


def test_front_end_tests_typecheck_against_the_wire_types() -> None:
    """Vitest strips types without checking them, so a test feeding events of an old shape would
    still pass; `npm run typecheck` compiles src/ and test/ together against events.generated.ts."""
    if not (LABEXT / "node_modules" / "typescript").is_dir():
        pytest.skip(f"{LABEXT}/node_modules is absent: run `npm install` in labextension/ (pip install -e . does it)")
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not on PATH")
    proc = subprocess.run([npm, "run", "--silent", "typecheck"], cwd=LABEXT, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, f"tsc found type errors:\n{(proc.stdout + proc.stderr)[-6000:]}"
