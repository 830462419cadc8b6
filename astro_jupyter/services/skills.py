"""Skills: ``SKILL.md`` files under the skills directory, each with front-matter name/description.

Layout: ``<skills_dir>/<anything>/SKILL.md`` (or ``<skills_dir>/<name>.md``). The front matter
is the block between the first two ``---`` lines, ``key: value`` per line; ``name`` and
``description`` are required. Skills are read on demand so editing a file takes effect at once.

Whose skills: those directly under ``skills/`` are installed by the server's owner (by hand,
or by an ownerless run after a question that quoted them) and every identity reads them; a
named identity's own live in ``skills/owners/<key>/`` (``services/owners.py``) and only it
reads them. On a name clash the installed skill wins and the clash is reported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import AstroError
from .owners import OWNERS_DIR, owner_dir


class SkillError(AstroError):
    reason = "skill"


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    body: str
    path: Path


_FRONT = re.compile(r"\A---[ \t]*\n(.*?)\n---[ \t]*\n?(.*)\Z", re.S)


def parse_skill(path: Path) -> Skill:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SkillError(f"cannot read skill file {path}: {exc}") from exc
    match = _FRONT.match(text.replace("\r\n", "\n"))
    if not match:
        raise SkillError(f"{path}: missing front matter (a '---' block with name and description)")
    meta: dict[str, str] = {}
    for line in match.group(1).splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition(":")
        if not sep:
            raise SkillError(f"{path}: front-matter line is not 'key: value': {line!r}")
        meta[key.strip().lower()] = value.strip().strip("'\"")
    missing = [k for k in ("name", "description") if not meta.get(k)]
    if missing:
        raise SkillError(f"{path}: front matter lacks {', '.join(missing)}")
    return Skill(meta["name"], meta["description"], match.group(2).strip(), path)


class SkillLibrary:
    """The skills one identity sees: the installed ones and, for a named ``owner``, its own."""

    def __init__(self, skills_dir: Path, owner: str = "") -> None:
        self.installed_dir = Path(skills_dir)
        self.skills_dir = owner_dir(self.installed_dir, owner)  # where this identity's skills go

    def _files(self) -> list[Path]:
        found: list[Path] = []
        for base in dict.fromkeys((self.installed_dir, self.skills_dir)):
            if base.is_dir():
                found += sorted(p for p in base.glob("*/SKILL.md") if p.parent.name != OWNERS_DIR)
                found += sorted(base.glob("*.md"))
        return [p for p in found if p.is_file()]

    def scan(self) -> tuple[list[Skill], list[str]]:
        """All valid skills (sorted by name) and one message per file that could not be used."""
        skills: dict[str, Skill] = {}
        problems: list[str] = []
        for path in self._files():
            try:
                skill = parse_skill(path)
            except SkillError as exc:
                problems.append(str(exc))
                continue
            if skill.name in skills:
                problems.append(f"{path}: duplicate skill name {skill.name!r} (also {skills[skill.name].path})")
                continue
            skills[skill.name] = skill
        return [skills[n] for n in sorted(skills)], problems

    def list(self) -> list[Skill]:
        return self.scan()[0]

    def get(self, name: str) -> Skill:
        skills, problems = self.scan()
        for skill in skills:
            if skill.name == name:
                return skill
        known = ", ".join(s.name for s in skills) or "none"
        extra = f" ({len(problems)} skill file(s) could not be read: {'; '.join(problems)})" if problems else ""
        raise SkillError(f"no skill named {name!r}; available: {known}{extra}")
