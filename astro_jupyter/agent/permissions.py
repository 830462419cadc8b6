"""The central permission rule chain: Deny > Allow > Ask > default Allow.

A call is judged on the tool's own rules (``tool.check_permissions(args)``) together with
the configured rules; a deny anywhere wins, so no allow rule can open what a deny closes.
``Ask`` is then shaped by the permission mode: ``auto`` lets read-only tools through
without a question, ``deny`` turns every question into a refusal (for unattended runs),
and ``ask`` always asks. "Always" answers are remembered per session so a user who said
"always allow file_write" is not asked again in that conversation.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Literal, Mapping

from .tools.base import PermissionRule

if TYPE_CHECKING:
    from ..config import AstroConfig
    from .tools.base import AgentTool

Action = Literal["allow", "deny", "ask"]
MODES = ("auto", "ask", "deny")
# The one vocabulary of answers to a permission question (sidebar buttons, ACP options, the HTTP route; typed
# replies are mapped onto it by app.follow.permission_answer): this call, this and later ones in the session, no.
ANSWERS = ("allow", "always", "deny")


@dataclass(frozen=True)
class PermissionDecision:
    """The verdict on one call; ``source`` says which layer decided (for the audit log)."""

    action: Action
    reason: str = ""
    source: str = "default"  # tool | config | mode | session | default

    @property
    def allowed(self) -> bool:
        return self.action == "allow"


@dataclass(frozen=True)
class Unattended:
    """A run no one can answer (a notebook executed by nbconvert, nbclient or papermill): each question
    is decided at once instead of waiting out the permission timeout (``ToolLimits``). Tools named in ``allow`` (an
    explicit allow-list given for unattended runs) are allowed; every other question is denied, saying
    ``why`` and how to allow it. Deny rules and hard deny lists are decided before any question, so the
    allow-list can never open them."""

    why: str
    allow: frozenset[str] = frozenset()
    source: str = ""  # where the allow-list came from, e.g. "%%astro --allow"
    # how to allow a refused call where this front end has no allow-list of its own (astro-jupyter mcp);
    # "" is the notebook's way (%%astro --allow, c.AstroConfig.unattended_allow)
    how: str = ""

    def decide(self, tool_name: str, reason: str) -> PermissionDecision:
        if tool_name in self.allow:
            return PermissionDecision("allow", f"allowed without asking for unattended runs ({self.source})", "unattended")
        how = self.how or (f"To allow it in unattended runs, list it: %%astro --allow {tool_name} "
                           "(or c.AstroConfig.unattended_allow)")
        return PermissionDecision("deny", f"{reason}; not asked: {self.why}. {how}", "unattended")

    def notice(self) -> str:
        """What the run's timeline and the exported log say about it (once, at the start)."""
        allowed = ", ".join(sorted(self.allow))
        rule = (f"allowed without asking: {allowed} ({self.source}); every other question is denied at once"
                if allowed else "every question is denied at once (no tools are allowed for unattended runs)")
        return f"Unattended run: {self.why}. {rule[0].upper()}{rule[1:]}."


def tool_matches(pattern: str, name: str) -> bool:
    """``*`` matches every tool; globs (``file_*``) and ``a|b`` alternatives are accepted too."""
    pattern = (pattern or "*").strip()
    if pattern == "*":
        return True
    return any(fnmatch.fnmatchcase(name, alt.strip()) for alt in pattern.split("|") if alt.strip())


def coerce_rule(rule: PermissionRule | Mapping[str, Any]) -> PermissionRule:
    """Turn a config dict into a rule, refusing unknown actions loudly (a typo must not allow)."""
    if isinstance(rule, PermissionRule):
        return rule
    action = str(rule.get("action", "")).strip().lower()
    if action not in ("allow", "deny", "ask"):
        raise ValueError(f"permission rule {dict(rule)!r}: action must be allow, deny or ask")
    return PermissionRule(action=action, tool=str(rule.get("tool") or "*"), reason=str(rule.get("reason") or ""))  # type: ignore[arg-type]


def permission_scope(tool: "AgentTool", args: dict[str, Any]) -> str:
    """What an "always" answer covers for this call ("" = the whole tool); a broken scope asks again."""
    try:
        return str(tool.permission_scope(args) or "")
    except Exception:  # noqa: BLE001
        return ""


class PermissionChecker:
    """Judges calls against tool rules + configured rules; remembers "always" answers per session."""

    def __init__(self, rules: Iterable[PermissionRule | Mapping[str, Any]] = (), mode: str = "auto") -> None:
        if mode not in MODES:
            raise ValueError(f"permission mode must be one of {', '.join(MODES)}, not {mode!r}")
        self.rules: list[PermissionRule] = [coerce_rule(r) for r in rules]
        self.mode = mode
        self._always: dict[str, set[str]] = {}

    @classmethod
    def from_config(cls, config: "AstroConfig") -> "PermissionChecker":
        return cls(config.permission_rules, config.permission_mode)

    # -- session memory --------------------------------------------------------------------
    def allow_always(self, tool_name: str, session_id: str = "", scope: str = "") -> None:
        """Record an "always" answer: the tool no longer asks for the rest of this session.

        With a ``scope`` (a tool's ``permission_scope``, e.g. one notebook) the answer holds
        for that scope only: "Allow for this notebook".
        """
        self._always.setdefault(session_id, set()).add(f"{tool_name}\x00{scope}" if scope else tool_name)

    def always_allowed(self, tool_name: str, session_id: str = "", scope: str = "") -> bool:
        remembered = self._always.get(session_id, ())
        return tool_name in remembered or bool(scope) and f"{tool_name}\x00{scope}" in remembered

    # -- the chain -----------------------------------------------------------------------------
    def check(self, tool: "AgentTool", args: dict[str, Any], *, session_id: str = "") -> PermissionDecision:
        """Deny > Allow > Ask > default Allow over the tool's rules and the configured ones."""
        try:
            own = [coerce_rule(r) for r in tool.check_permissions(args)]
        except Exception as exc:  # noqa: BLE001 - a broken rule function must fail closed
            return PermissionDecision("deny", f"{tool.name}: permission check failed ({type(exc).__name__}: {exc})", "tool")
        matching: list[tuple[str, PermissionRule]] = [("tool", r) for r in own if tool_matches(r.tool, tool.name)]
        matching += [("config", r) for r in self.rules if tool_matches(r.tool, tool.name)]

        for wanted in ("deny", "allow"):
            for source, rule in matching:
                if rule.action == wanted:
                    return PermissionDecision(wanted, rule.reason or f"{wanted} rule for {rule.tool!r}", source)  # type: ignore[arg-type]
        asks = [(source, rule) for source, rule in matching if rule.action == "ask"]
        if not asks:
            return PermissionDecision("allow", "", "default")
        source, rule = asks[0]
        reason = rule.reason or f"{tool.name} needs your confirmation"
        if self.always_allowed(tool.name, session_id, permission_scope(tool, args)):
            return PermissionDecision("allow", f"always allowed in this session ({reason})", "session")
        if self.mode == "auto" and tool.is_readonly:
            return PermissionDecision("allow", f"read-only tool in auto mode ({reason})", "mode")
        if self.mode == "deny":
            return PermissionDecision(
                "deny", f"{reason}; permission mode 'deny' refuses calls that need confirmation", "mode"
            )
        return PermissionDecision("ask", reason, source)
