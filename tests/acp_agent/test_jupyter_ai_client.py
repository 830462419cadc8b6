"""jupyter-ai's own ACP client runs ``astro-jupyter acp`` as its persona would (tests/acp_agent/jupyter_ai_driver.py).

jupyter-ai-acp-client pins agent-client-protocol < 0.12 (ours is 0.12), so it lives in a virtualenv
of its own: ``ASTRO_JUPYTER_AI_PYTHON`` names that environment's python (.ci/run makes one).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.acp_agent.test_acp_stdio import acp_env
from tests.fakes.openai_server import Turn

DRIVER = Path(__file__).with_name("jupyter_ai_driver.py")
JAI_PYTHON = os.environ.get("ASTRO_JUPYTER_AI_PYTHON", "")

needs_jupyter_ai = pytest.mark.skipif(
    not (JAI_PYTHON and Path(JAI_PYTHON).exists()),
    reason="set ASTRO_JUPYTER_AI_PYTHON to a python with jupyter-ai-acp-client installed (.ci/run makes one)",
)


@needs_jupyter_ai
def test_jupyter_ai_runs_astro_as_its_persona(tmp_path, openai_server, sesame_server):
    openai_server.script(
        Turn.call("query_target", {"name": "M 31"}, id="q1"),
        Turn.call("file_write", {"path": "m31.md", "content": "# M 31\n"}, id="w1"),
        Turn.say("M 31 is at RA 00:42:44.33; noted in m31.md."),
    )
    env = acp_env(tmp_path, openai_server.url, sesame_server.url)
    project = tmp_path / "project"
    proc = subprocess.run([JAI_PYTHON, str(DRIVER), sys.executable, str(project), "Where is M 31? Note it."],
                          env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["stop_reason"] == "end_turn" and out["exit"] == 0
    assert out["modes"] == ["default", "coordinator"] and out["config"] == ["model"]
    # the chat shows the answer; the permission card had our three choices and "Allow" wrote the file
    assert any("M 31 is at RA 00:42:44.33; noted in m31.md." in body for body in out["messages"])
    assert out["asked"] == [{"id": "w1", "options": [["allow", "Allow", "allow_once"],
                                                      ["always", "Always allow", "allow_always"],
                                                      ["deny", "Deny", "reject_once"]]}]
    assert (project / "m31.md").read_text() == "# M 31\n"
