"""The agent host: the sidebar's agent runtime in a process of its own, managed by the server extension
like a kernel (``server/host.py`` starts, watches and stops it; ``channel.py`` is the wire between them)."""
