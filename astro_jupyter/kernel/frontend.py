"""Is anyone there to answer? A kernel cell run by nbconvert, nbclient or papermill has no one.

Questions in a ``%%astro`` cell are answered with widget buttons or, failing that, ``input()``.
Under ``jupyter nbconvert --execute`` / nbclient / papermill neither can be answered: widgets
are written into the output file but never rendered, so the run used to wait out
the permission timeout (5 minutes) for every question, and a cell timeout aborted the
whole notebook. Such a run is *unattended*: each question is decided at once (denied, unless
the tool is on the explicit allow-list for unattended runs) and the cell says why.

The signal, and why it is this one:

* ``allow_stdin`` of the ``execute_request`` that runs the cell. Every interactive frontend
  sends ``true`` (JupyterLab's and Notebook's ``requestExecute`` default, VS Code, jupyter
  console, ``jupyter_client`` with a stdin channel); nbclient (hence nbconvert and papermill)
  sets ``kc.allow_stdin = False`` because it cannot answer ``input_request``. It is the
  frontend stating, per request, whether a person can answer it.
* Comms opened *by the frontend* (``primary=False`` in the kernel's comm manager, e.g. the
  ipywidgets manager's ``jupyter.widget.control`` comm). A frontend that renders widgets opens
  one when it connects (if ipywidgets was already imported); nbclient opens none. This only
  ever turns the answer to "someone is there", for a widget frontend that ran the cell with
  ``allow_stdin`` off.

Both must say "no one" for a run to be unattended, so an interactive frontend is never
mistaken for a headless one (a wrong guess that way would deny a question the user could have
answered — still safe, but a guess the other way would bring back the 5-minute waits). Terminal
IPython has no kernel and keeps asking with ``input()``, which fails at once without a terminal.
"""

from __future__ import annotations

import sys
from typing import Any, Iterable

from ..app.follow import Unattended

WHY = ("no one can answer questions in this kernel: the cell was run with allow_stdin off (as jupyter nbconvert "
       "--execute, nbclient and papermill run it) and no widget frontend is connected")


def _allow_stdin(shell: Any, kernel: Any) -> bool | None:
    parent: Any = None
    get_parent = getattr(kernel, "get_parent", None)
    if callable(get_parent):
        try:
            parent = get_parent("shell")
        except Exception:  # noqa: BLE001 - older ipykernel: fall back to the shell's header
            parent = None
    if not parent:
        parent = {"content": {}, "header": getattr(shell, "parent_header", None) or {}}
    content = parent.get("content") if isinstance(parent, dict) else None
    value = content.get("allow_stdin") if isinstance(content, dict) else None
    if value is None:
        value = getattr(kernel, "_allow_stdin", None)
    return None if value is None else bool(value)


def _frontend_comms(kernel: Any) -> int:
    """How many open comms a frontend opened (``primary`` False), counted across comm managers."""
    managers: list[Any] = [getattr(kernel, "comm_manager", None)]
    comm_module = sys.modules.get("comm")
    get_manager = getattr(comm_module, "get_comm_manager", None)
    if callable(get_manager):
        try:
            managers.append(get_manager())
        except Exception:  # noqa: BLE001 - no comm support: no comms
            pass
    seen: set[int] = set()
    count = 0
    for manager in managers:
        comms = getattr(manager, "comms", None)
        if not isinstance(comms, dict) or id(manager) in seen:
            continue
        seen.add(id(manager))
        count += sum(1 for comm in list(comms.values()) if getattr(comm, "primary", True) is False)
    return count


def no_one_to_answer(shell: Any) -> str | None:
    """Why no one can answer this cell's questions, or None when someone may (see the module docstring)."""
    kernel = getattr(shell, "kernel", None)
    if kernel is None:
        return None
    if _allow_stdin(shell, kernel) is not False:
        return None
    if _frontend_comms(kernel):
        return None
    return WHY


def parse_allow(raw: Iterable[str], known: Iterable[str]) -> frozenset[str]:
    """Tool names from ``--allow a,b`` / ``unattended_allow``; an unknown name or a wildcard is an error
    (a typo must not pass silently, and an allow-list names tools one by one)."""
    names = {part.strip() for item in raw for part in str(item).split(",") if part.strip()}
    known = set(known)
    bad = sorted(n for n in names if n not in known)
    if bad:
        raise ValueError(f"not a tool: {', '.join(bad)} (an allow-list names tools one by one; see %astro tools)")
    return frozenset(names)


def unattended_policy(shell: Any, cell_allow: Iterable[str], config_allow: Iterable[str],
                      known: Iterable[str]) -> Unattended | None:
    """The run's ``Unattended`` policy when no one can answer, else None (questions are asked as usual)."""
    why = no_one_to_answer(shell)
    if why is None:
        return None
    cell = parse_allow(cell_allow, known)
    configured = parse_allow(config_allow, known)
    sources = [label for label, names in (("%%astro --allow", cell), ("c.AstroConfig.unattended_allow", configured))
               if names]
    return Unattended(why, cell | configured, " and ".join(sources))
