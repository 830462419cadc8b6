"""MCP, both ways, over the application layer.

- ``server.py``: ``astro-jupyter mcp`` offers our astronomy tools to any MCP client (stdio or
  streamable HTTP with a bearer token); which tools, and with which hints, is ``exposed.py``.
- ``client.py``: servers others publish (``c.AstroConfig.mcp_servers``, jupyter-ai's
  ``.jupyter/mcp_settings.json``) started lazily; their tools become deferred agent tools
  (``agent/tools/mcp.py``) that ask before every call unless the user allowed them.
- ``jupyter_tools.py``: the same read-only tools for Jupyter's MCP extension
  (the ``jupyter_server_mcp.tools`` entry point).
"""
