"""Cost of the hard deny list on directory walks (glob_files / grep_files).

Run: ``python benchmarks/bench_fs_walk.py [--files 20000]`` (from the checkout). Builds a
project tree in a temporary directory (ordinary files, dot-directories, a fake
site-packages and a library with tool results) and walks it with and without the deny
list, printing files seen, files kept and the time per walk (median of 5) and per entry;
then what every file-tool call pays before it touches a file: building the deny list
(``protection``) and resolving one path (``resolve_path``), in µs (median of 5 × 200 calls).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from astro_jupyter.agent.tools.filesystem.glob import walk_files  # noqa: E402
from astro_jupyter.agent.tools.filesystem.protected import protection  # noqa: E402
from astro_jupyter.agent.tools.filesystem.security import resolve_path, sandbox_roots  # noqa: E402
from astro_jupyter.config import AstroConfig  # noqa: E402


def build(root: Path, files: int) -> AstroConfig:
    config = AstroConfig(home=str(root / "library"), project_root=str(root))
    config.ensure_dirs()
    per_dir = 100
    for i in range(files):
        kind = i % 10
        sub = {0: ".cache", 1: "venv/lib/python3.11/site-packages/pkg", 2: "library/tool-results"}.get(kind, "src")
        d = root / sub / f"d{i // per_dir}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i}.txt").write_text("x")
    return config


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=20_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp).resolve()
        config = build(root, args.files)
        roots = sandbox_roots(config)
        print(f"{'walk':<22} {'kept':>7} {'median s':>9} {'µs/file':>8}")
        for label, protect in (("no deny list", None), ("deny list (owner '')", protection(config, ""))):
            times, kept = [], 0
            for _ in range(5):
                t0 = time.perf_counter()
                kept = sum(1 for _ in walk_files(root, roots, None, protect))
                times.append(time.perf_counter() - t0)
            med = statistics.median(times)
            print(f"{label:<22} {kept:>7} {med:>9.3f} {med / args.files * 1e6:>8.1f}")
        print(f"\n{'per call':<36} {'µs':>7}")
        for label, call in (("sandbox_roots", lambda: sandbox_roots(config)),
                            ("protection (owner 'alice')", lambda: protection(config, "alice")),
                            ("resolve_path('src/d3/f30.txt')", lambda: resolve_path("src/d3/f30.txt", config, owner="alice"))):
            print(f"{label:<36} {per_call(call):>7.0f}")


def per_call(call: Any, calls: int = 200) -> float:
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(calls):
            call()
        times.append((time.perf_counter() - t0) / calls)
    return statistics.median(times) * 1e6


if __name__ == "__main__":
    main()
