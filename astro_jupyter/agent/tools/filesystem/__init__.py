"""The filesystem tool family: read, search and change files inside the sandbox roots.

Read-only and concurrency-safe: ``read_file``, ``grep_files``, ``glob_files``.
Side effects: ``run_bash`` (asks permission, Cancel), ``file_write`` and ``file_edit``
(Block: a started write finishes; they ask outside the library's notes folder).
``security.py`` holds the path sandbox, ``protected.py`` the hard deny list inside it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .bash import RunBashTool
from .edit import FileEditTool
from .glob import GlobFilesTool
from .grep import GrepFilesTool
from .read import ReadFileTool
from .write import FileWriteTool

if TYPE_CHECKING:
    from ....config import AstroConfig
    from ..base import AgentTool

__all__ = ["FileEditTool", "FileWriteTool", "GlobFilesTool", "GrepFilesTool", "ReadFileTool", "RunBashTool", "tools"]


def tools(config: "AstroConfig") -> list["AgentTool"]:
    return [ReadFileTool(), GrepFilesTool(), GlobFilesTool(), RunBashTool(), FileWriteTool(config), FileEditTool(config)]
