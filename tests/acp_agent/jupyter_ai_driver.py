"""Runs in a separate virtualenv holding jupyter-ai's ACP client (``jupyter-ai-acp-client``, which pins an
older ``agent-client-protocol`` than ours): its ``JaiAcpClient`` — the client every jupyter-ai ACP persona
uses — starts ``astro-jupyter acp`` and sends one chat message; the permission the agent asks is granted
with jupyter-ai's own ``resolve_permission`` (what its "Allow" button calls). The persona object is a
stand-in carrying a real jupyterlab-chat ``YChat`` (jupyter-ai's persona manager needs a running
collaborative Jupyter server). Prints JSON: stop reason, the chat's messages, the permission options.

    python jupyter_ai_driver.py AGENT_PYTHON PROJECT_DIR PROMPT
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from types import SimpleNamespace

from jupyter_ai_acp_client.default_acp_client import JaiAcpClient
from jupyterlab_chat.models import User
from jupyterlab_chat.ychat import YChat


class Persona:
    """What ``JaiAcpClient`` reads from a persona, around a real chat document."""

    id = "jupyter-ai-personas::astro::Astro"

    def __init__(self, root: str) -> None:
        self.chat = YChat()
        self.chat.set_user(User(username=self.id, name="Astro", display_name="Astro"))
        self.parent = SimpleNamespace(root_dir=root)
        self.log = logging.getLogger("persona")
        self.acp_slash_commands: list = []
        self.modes: list = []
        self.config_options: list = []

    def get_chat_dir(self) -> str:
        return self.parent.root_dir

    def get_mcp_settings(self) -> None:
        return None

    def set_status(self, *args, **kwargs) -> None: ...
    def clear_status(self, *args, **kwargs) -> None: ...
    def report_slash_commands(self, *args, **kwargs) -> None: ...
    def update_acp_current_mode(self, mode_id) -> None: self.modes.append(mode_id)
    def update_acp_config_options(self, options) -> None: self.config_options = options
    def update_acp_context_usage(self, *args) -> None: ...
    def update_acp_session_usage(self, *args) -> None: ...
    def _sync_awareness_config(self) -> None: ...
    def _sync_awareness_usage(self) -> None: ...


async def main(agent_python: str, root: str, prompt: str) -> dict:
    loop = asyncio.get_running_loop()
    proc = await asyncio.create_subprocess_exec(agent_python, "-m", "astro_jupyter.cli", "acp", cwd=root,
                                                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                                                limit=50 * 1024 * 1024)
    client = JaiAcpClient(agent_subprocess=proc, event_loop=loop)
    persona = Persona(root)
    session = await client.create_session(persona)
    sid = session.session_id
    asked: list = []

    async def grant() -> None:  # the user clicks "Allow" on each permission card
        while True:
            state = client._tool_call_manager._sessions.get(sid)
            for call in list(state.tool_calls.values()) if state else []:
                if call.permission_status == "pending" and call.tool_call_id not in [a["id"] for a in asked]:
                    asked.append({"id": call.tool_call_id,
                                  "options": [[o.option_id, o.name, o.kind] for o in call.permission_options]})
                    client.resolve_permission(sid, call.tool_call_id, "allow")
            await asyncio.sleep(0.05)

    granter = asyncio.create_task(grant())
    response = await asyncio.wait_for(client.prompt_and_reply(session_id=sid, prompt=prompt, root_dir=root), 120)
    granter.cancel()
    proc.stdin.close()
    await asyncio.wait_for(proc.wait(), 60)
    return {
        "session_id": sid,
        "stop_reason": response.stop_reason,
        "modes": [m.id for m in session.modes.available_modes],
        "config": [o.id for o in session.config_options or []],
        "messages": [m.body for m in persona.chat.get_messages()],
        "asked": asked,
        "exit": proc.returncode,
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(*sys.argv[1:4]))))
