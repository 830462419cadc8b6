"""Write labextension/src/events.generated.ts from astro_jupyter/events.py (the wire contract).

    python scripts/gen_event_types.py          # regenerate the committed file
    python scripts/gen_event_types.py --check  # exit 1 when the committed file is stale

tests/test_wire_contract.py runs the same comparison, so a change to an event dataclass that
is not regenerated fails the suite.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from astro_jupyter.wire_contract import TS_PATH, typescript_source  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="compare only; exit 1 when the file differs")
    args = ap.parse_args()
    target = ROOT / TS_PATH
    wanted = typescript_source()
    current = target.read_text(encoding="utf-8") if target.exists() else None
    if args.check:
        if current != wanted:
            print(f"{TS_PATH} is stale: run python scripts/gen_event_types.py", file=sys.stderr)
            return 1
        print(f"{TS_PATH} is up to date")
        return 0
    if current == wanted:
        print(f"{TS_PATH} unchanged")
    else:
        target.write_text(wanted, encoding="utf-8")
        print(f"wrote {TS_PATH}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
