"""How much ``%load_ext`` adds to a fresh IPython: astro_jupyter vs jupyter_ai_magics.

Each measurement is a fresh subprocess: create an ``InteractiveShell``, then time
``%load_ext X`` alone (the shell's own start-up is not counted). Median of N runs; also
the number of modules the load imported and whether heavy ones (openai, numpy, pymupdf,
ipywidgets) came with it. A second astro_jupyter row times the first real use
(``%astro tools``: the store, the registry), which is where the lazy imports land.
jupyter_ai_magics is skipped with a note when it is not installed
(``pip install jupyter-ai-magics``).

    python benchmarks/bench_load_ext.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile

PROBE = r"""
import json, sys, time, os
from IPython.core.interactiveshell import InteractiveShell
ip = InteractiveShell.instance()
before = set(sys.modules)
t0 = time.perf_counter()
ip.run_line_magic("load_ext", sys.argv[1])
load = time.perf_counter() - t0
new = set(sys.modules) - before
first_use = None
if sys.argv[2] == "use":
    t1 = time.perf_counter()
    ip.run_line_magic("astro", "tools")
    first_use = time.perf_counter() - t1
heavy = sorted(m for m in ("openai", "numpy", "fitz", "pymupdf", "ipywidgets", "langchain", "langchain_core") if m in new)
print(json.dumps({"load": load, "first_use": first_use, "modules": len(new), "heavy": heavy}))
"""


def measure(ext: str, runs: int, use: bool, home: str) -> list[dict]:
    results = []
    env = {**os.environ, "ASTRO_HOME": home}
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", PROBE, ext, "use" if use else "load"],
                             capture_output=True, text=True, timeout=300, env=env)
        if out.returncode != 0:
            raise RuntimeError(f"{ext}: {out.stderr.strip().splitlines()[-1] if out.stderr else out.returncode}")
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return results


def row(label: str, samples: list[dict], key: str) -> str:
    values = [s[key] for s in samples]
    med = statistics.median(values)
    heavy = ",".join(samples[0]["heavy"]) or "-"
    return (f"| {label:<34} | {med * 1000:9.1f} | {min(values) * 1000:9.1f} | {max(values) * 1000:9.1f} "
            f"| {samples[0]['modules'] if samples[0]['modules'] >= 0 else '-':>7} | {heavy:<22} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    home = tempfile.mkdtemp(prefix="astro-bench-")
    print(f"fresh subprocess per run, median of {args.runs} runs; times in ms\n")
    print("| extension                          | median ms |    min ms |    max ms | modules | heavy imports          |")
    print("|------------------------------------|-----------|-----------|-----------|---------|------------------------|")
    ours = measure("astro_jupyter", args.runs, use=True, home=home)
    print(row("%load_ext astro_jupyter", ours, "load"))
    ours_use = [{**s, "modules": -1, "heavy": []} for s in ours]
    print(row("  then first %astro tools", [{**s, "load": s["first_use"]} for s in ours_use], "load"))
    notes = []
    if importlib.util.find_spec("jupyter_ai_magics") is None:
        notes.append("jupyter_ai_magics is not installed: column skipped (pip install jupyter-ai-magics)")
    else:
        try:
            theirs = measure("jupyter_ai_magics", args.runs, use=False, home=home)
            print(row("%load_ext jupyter_ai_magics", theirs, "load"))
            ratio = statistics.median(s["load"] for s in theirs) / statistics.median(s["load"] for s in ours)
            notes.append(f"jupyter_ai_magics / astro_jupyter load time: {ratio:.0f}x")
        except RuntimeError as exc:
            notes.append(f"jupyter_ai_magics failed to load: {exc}")
    goal = statistics.median(s["load"] for s in ours)
    notes.append(f"goal ≤ 150 ms for %load_ext astro_jupyter: {'met' if goal <= 0.15 else 'NOT met'} ({goal * 1000:.1f} ms)")
    print()
    for note in notes:
        print("-", note)


if __name__ == "__main__":
    main()
