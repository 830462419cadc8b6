"""Print the README's configuration table from ``AstroConfig`` (run: python scripts/config_table.py).

tests/test_readme.py checks that every trait appears in README.md, so the table cannot drift.
"""

from __future__ import annotations

import os
import re

from astro_jupyter.config import AstroConfig

_ENV = re.compile(r"\(env ([A-Z0-9_]+)[^)]*\)|env ([A-Z0-9_]+)")


def rows() -> list[tuple[str, str, str, str]]:
    for name in list(os.environ):
        if name.startswith(("ASTRO_", "OPENAI_", "LLM_", "ADS_")):
            del os.environ[name]
    config = AstroConfig(home="~/.astro_jupyter", project_root="(working directory)")
    out = []
    for name, trait in sorted(AstroConfig.class_traits(config=True).items()):
        help_text = " ".join((trait.help or "").split())
        match = _ENV.search(help_text)
        env = (match.group(1) or match.group(2)) if match else ""
        default = getattr(config, name)
        shown = repr(default) if default not in ("", [], {}) else "—"
        if name == "home":
            shown = "'~/.astro_jupyter'"
        text = _ENV.sub("", help_text).replace("; )", ")").replace("()", "")
        text = re.sub(r"\s+([.,;)])", r"\1", text).strip().rstrip(".") + "."
        out.append((name, env, shown, text))
    return out


def markdown() -> str:
    lines = ["| `c.AstroConfig.` trait | env var | default | what |", "|---|---|---|---|"]
    for name, env, default, help_text in rows():
        env_cell = f"`{env}`" if env else ""
        lines.append(f"| `{name}` | {env_cell} | `{default}` | {help_text.replace('|', '/')} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown())
