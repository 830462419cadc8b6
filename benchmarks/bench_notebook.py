"""Notebook figures: kernel_run overhead over a bare exec, and notebook_edit on a 500-cell notebook.

Run: ``python benchmarks/bench_notebook.py [--runs 200] [--cells 500] [--edits 40]`` from the checkout.

1. kernel_run (goal: ≤ 5 ms overhead). A real ipykernel is started with jupyter_client,
   ``%load_ext astro_jupyter`` loaded, and inside that kernel the same small statement is run
   ``--runs`` times three ways: a bare ``exec`` in the user namespace; ``KernelRunTool.execute``
   (the tool itself: loop thread → the kernel's main thread, stdout capture, figure check,
   result back); and the whole executor pipeline as ``%astro kernel_run`` runs it (validation,
   an allow rule, hooks, two audit rows in SQLite, events). Overhead = median(tool) − median(exec).
2. notebook_edit (goal: ≤ 50 ms). A ``--cells``-cell notebook (code cells with outputs) under a
   jupyter_server ``FileContentsManager``; ``NotebookService.edit`` through the server backend
   (ContentsManager get, or a stat when the file is still what this backend saved → insert/replace →
   validate the changed cell → save), ``--edits`` times. The first edit of a run also makes a
   checkpoint; it is reported apart. The nbformat file backend for comparison, and
   ``FileContentsManager.save`` alone (validation ×2, signing, nbformat.write: the floor here).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

KERNEL_SIDE = textwrap.dedent('''
    import asyncio, json, statistics, time
    from astro_jupyter.kernel.magics import _loaded
    from astro_jupyter.agent.tools.notebook.kernel import KernelRunTool
    rt = _loaded[id(get_ipython())].rt
    registry = rt.registry_sync()
    tool = registry.get("kernel_run")
    ns = get_ipython().user_ns
    CODE = "bench_x = sum(range(50))"
    RUNS = {runs}

    def bare():
        times = []
        code = compile(CODE, "<bench>", "exec")
        for _ in range(RUNS):
            t = time.perf_counter(); exec(code, ns); times.append(time.perf_counter() - t)
        return times

    async def tool_times():
        times = []
        for _ in range(RUNS):
            t = time.perf_counter(); await tool.execute({{"code": CODE}}, None); times.append(time.perf_counter() - t)
        return times

    def pipeline():
        times = []
        for _ in range(RUNS):
            t = time.perf_counter(); rt.run_tool("kernel_run", {{"code": CODE}}); times.append(time.perf_counter() - t)
        return times

    rt.run_tool("kernel_run", {{"code": CODE}})  # warm: services, store, executor
    rt.call(tool_times)
    result = {{"bare": bare(), "tool": rt.call(tool_times), "pipeline": pipeline()}}
    print("BENCH" + json.dumps(result))
''')


def stats(xs: list[float]) -> tuple[float, float]:
    xs = sorted(xs)
    return statistics.median(xs) * 1000, xs[min(len(xs) - 1, int(len(xs) * 0.95))] * 1000


def bench_kernel_run(runs: int) -> None:
    from jupyter_client.manager import start_new_kernel

    home = tempfile.mkdtemp(prefix="astro-bench-")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ASTRO_"))}
    env.update(ASTRO_HOME=home, ASTRO_PROJECT_ROOT=home, PYTHONPATH=str(ROOT),
               ASTRO_PERMISSION_RULES=json.dumps([{"action": "allow", "tool": "kernel_run"}]))
    km, kc = start_new_kernel(kernel_name="python3", startup_timeout=60, cwd=home, env=env)
    out: list[str] = []
    try:
        kc.execute_interactive("%load_ext astro_jupyter", timeout=60)

        def hook(msg: dict[str, Any]) -> None:
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                out.append("\n".join(msg["content"]["traceback"]))

        kc.execute_interactive(KERNEL_SIDE.format(runs=runs), timeout=600, output_hook=hook)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    text = "".join(out)
    if "BENCH" not in text:
        raise SystemExit(f"kernel side failed:\n{text}")
    data = json.loads(text.split("BENCH", 1)[1].splitlines()[0])
    bare, tool, pipe = stats(data["bare"]), stats(data["tool"]), stats(data["pipeline"])
    print(f"kernel_run in a real ipykernel, {runs} runs of `bench_x = sum(range(50))` (ms, median / p95)")
    print(f"  bare exec                      {bare[0]:8.3f} / {bare[1]:8.3f}")
    print(f"  kernel_run tool (thread hop)   {tool[0]:8.3f} / {tool[1]:8.3f}   overhead {tool[0] - bare[0]:.3f} ms (goal ≤ 5)")
    print(f"  %astro kernel_run (executor)   {pipe[0]:8.3f} / {pipe[1]:8.3f}   overhead {pipe[0] - bare[0]:.3f} ms "
          "(incl. permission rule, hooks, 2 audit rows, events)")


def make_notebook(cells: int) -> Any:
    import nbformat.v4 as nbf

    nb = nbf.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for i in range(cells):
        if i % 5 == 0:
            nb.cells.append(nbf.new_markdown_cell(f"## Step {i}\nSome explanation of the reduction step {i}."))
            continue
        cell = nbf.new_code_cell(f"flux_{i} = reduce(frame_{i}, bias, flat)\nprint(flux_{i}.mean())", execution_count=i)
        cell.outputs = [nbf.new_output("stream", name="stdout", text=f"{i * 1.5}\n" * 3)]
        nb.cells.append(cell)
    return nb


async def bench_edit(cells: int, edits: int) -> None:
    import nbformat
    from jupyter_server.services.contents.filemanager import FileContentsManager

    from astro_jupyter.config import AstroConfig
    from astro_jupyter.server.notebooks import ServerNotebookBackend
    from astro_jupyter.services.notebooks import NotebookService

    root = Path(tempfile.mkdtemp(prefix="astro-bench-nb-"))
    path = root / "big.ipynb"
    path.write_text(nbformat.writes(make_notebook(cells)))
    size_kb = path.stat().st_size / 1024
    config = AstroConfig(home=str(root / "home"), project_root=str(root))
    server = SimpleNamespace(contents_manager=FileContentsManager(root_dir=str(root)))
    backends = {"ContentsManager": NotebookService(config, ServerNotebookBackend(server, config)),
                "nbformat file  ": NotebookService(config)}
    print(f"\nnotebook_edit on a {cells}-cell notebook ({size_kb:.0f} KiB), {edits} edits each (ms, median / p95)")
    for label, service in backends.items():
        nb = nbformat.read(path, as_version=4)
        target = nb.cells[cells // 2].id
        t = time.perf_counter()
        await service.edit(path, "insert", index=cells // 2, source="first = 1", run_id=f"run_{label}")
        first = (time.perf_counter() - t) * 1000
        times = []
        for i in range(edits):
            t = time.perf_counter()
            if i % 2:
                await service.edit(path, "replace", cell_id=target, source=f"flux = {i}", run_id=f"run_{label}")
            else:
                await service.edit(path, "insert", index=i, source=f"x = {i}", run_id=f"run_{label}")
            times.append(time.perf_counter() - t)
        med, p95 = stats(times)
        print(f"  {label}  {med:8.2f} / {p95:8.2f}   first edit of a run (with checkpoint) {first:.2f}   (goal ≤ 50)")
    nbformat.validate(nbformat.read(path, as_version=4))
    cm = server.contents_manager
    model = cm.get("big.ipynb", content=True, type="notebook")
    raw = []
    for _ in range(edits):
        t = time.perf_counter()
        cm.save({"type": "notebook", "format": "json", "content": model["content"]}, "big.ipynb")
        raw.append(time.perf_counter() - t)
    med, p95 = stats(raw)
    print(f"  (jupyter_server FileContentsManager.save alone, the floor of the ContentsManager path: {med:.2f} / {p95:.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--cells", type=int, default=500)
    parser.add_argument("--edits", type=int, default=40)
    parser.add_argument("--skip-kernel", action="store_true")
    args = parser.parse_args()
    if not args.skip_kernel:
        bench_kernel_run(args.runs)
    asyncio.run(bench_edit(args.cells, args.edits))


if __name__ == "__main__":
    main()
