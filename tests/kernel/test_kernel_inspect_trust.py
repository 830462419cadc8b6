"""The kernel is the user's: ``kernel_inspect`` runs none of their code and shows no secret without a question.

User classes whose every hook (property, ``__getattr__``, ``__getattribute__``, descriptors, ``__repr__``,
``__len__``, ``__iter__``, ``__eq__``/``__hash__``, a ``__class__`` property, NumPy/pandas subclass
overrides) appends to a marker file; inspecting them — the listing, by name, by attribute path — must
leave the file absent. Values that may carry credentials (``os.environ``, values from ``os``/``sys``/
``subprocess``, secret-like names and dict keys) are hidden in the listing and, by name, shown only
after an Allow: a denial keeps the value out of the model's requests, the database and the exported log.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.fakes.openai_server import Turn

HOOKS = r'''
import pathlib, os, sys, subprocess
import numpy as np, pandas as pd
MARK = pathlib.Path({mark!r})

def _hit(what):
    with open(MARK, "a") as fh:
        fh.write(what + "\n")

class Desc:
    def __get__(self, obj, owner=None):
        _hit("descriptor __get__")
        return 3

class Evil:
    desc = Desc()
    def __init__(self):
        self.plain = 41
    @property
    def prop(self):
        _hit("property")
        return 1
    def __getattr__(self, name):
        _hit("__getattr__ " + name)
        if name.startswith("__"):  # NumPy and pandas probe protocols while building the test objects
            raise AttributeError(name)
        return 2
    def __repr__(self):
        _hit("__repr__")
        return "Evil()"
    __str__ = __repr__
    def __format__(self, spec):
        _hit("__format__")
        return "Evil"
    def __len__(self):
        _hit("__len__")
        return 1
    def __iter__(self):
        _hit("__iter__")
        return iter([1])
    def __eq__(self, other):
        _hit("__eq__")
        return False
    def __hash__(self):
        _hit("__hash__")
        return 1
    def __bool__(self):
        _hit("__bool__")
        return True
    def __dir__(self):
        _hit("__dir__")
        return []
    @property
    def __class__(self):
        _hit("__class__ property")
        return dict

class Sneaky:
    def __init__(self):
        object.__setattr__(self, "value", 5)
    def __getattribute__(self, name):
        _hit("__getattribute__ " + name)
        return object.__getattribute__(self, name)

class Shadowed:
    @property
    def __dict__(self):
        _hit("__dict__ property")
        return {{}}

class EvilArray(np.ndarray):
    @property
    def shape(self):
        _hit("ndarray subclass property")
        return (1,)
    def __repr__(self):
        _hit("ndarray subclass __repr__")
        return "EvilArray"
    def __array_finalize__(self, obj):
        _hit("__array_finalize__")

class EvilFrame(pd.DataFrame):
    @property
    def _constructor(self):
        _hit("DataFrame subclass _constructor")
        return EvilFrame
    def __repr__(self):
        _hit("DataFrame subclass __repr__")
        return "EvilFrame"

evil = Evil()
sneaky = Sneaky()
shadowed = Shadowed()
evil_list = [Evil(), {{"k": Evil(), Evil(): 1}}, (Evil(),)]
evil_arr = np.arange(4.0).view(EvilArray)
evil_objects = np.array([Evil(), Evil()], dtype=object)
evil_df = pd.DataFrame({{"flux": [1.0, 2.0], "obj": [Evil(), Evil()]}}, index=[Evil(), Evil()])
evil_frame = EvilFrame({{"flux": [1.0, 2.0]}})
evil_series = pd.Series([Evil(), Evil()])
'''


def _clean(ip: Any, names: list[str]) -> None:
    for name in names:
        ip.user_ns.pop(name, None)


HOOK_NAMES = ["pathlib", "os", "sys", "subprocess", "np", "pd", "MARK", "_hit", "Desc", "Evil", "Sneaky", "Shadowed",
              "EvilArray", "EvilFrame", "evil", "sneaky", "shadowed", "evil_list", "evil_arr", "evil_objects",
              "evil_df", "evil_frame", "evil_series"]


def test_inspecting_runs_none_of_the_users_code(load, tmp_path: Path) -> None:
    ip = load()
    mark = tmp_path / "ran-user-code.txt"
    result = ip.run_cell(HOOKS.format(mark=str(mark)))
    assert result.success, result.error_in_exec
    mark.unlink(missing_ok=True)  # building the objects ran their hooks; inspecting must not
    try:
        listing = ip.run_line_magic("astro", "kernel_inspect")
        assert not listing.is_error, listing.content
        rows = {r["name"]: r for r in listing.data["variables"]}
        assert {"evil", "sneaky", "evil_arr", "evil_df", "evil_frame"} <= set(rows)
        outputs = {}
        for name in ["evil", "sneaky", "shadowed", "evil_list", "evil_arr", "evil_objects", "evil_df", "evil_frame",
                     "evil_series", "Evil", "evil.plain", "evil.prop", "evil.desc", "evil.missing", "sneaky.value",
                     "evil_arr.shape", "evil_arr.T", "evil_df.obj", "evil_df.flux", "evil_list.append"]:
            outputs[name] = ip.run_line_magic("astro", f"kernel_inspect name={name}")
        ran = mark.read_text() if mark.exists() else ""
        assert ran == "", f"inspecting ran the user's code: {ran.splitlines()}"
    finally:
        _clean(ip, HOOK_NAMES)
    # what the agent still learns, from data and static lookup
    assert outputs["evil.plain"].content == "evil.plain: 41"
    assert outputs["evil.prop"].is_error and "property of Evil" in outputs["evil.prop"].content
    assert "not evaluated" in outputs["evil.prop"].content and "kernel_run" in outputs["evil.prop"].content
    assert outputs["evil.desc"].is_error and "Desc of Evil" in outputs["evil.desc"].content
    assert outputs["evil.missing"].is_error and "AttributeError" in outputs["evil.missing"].content
    assert outputs["sneaky.value"].content == "sneaky.value: 5"
    assert ".plain = 41" in outputs["evil"].content and "Evil object" in outputs["evil"].content
    assert "<__main__.Evil object>" in outputs["evil_list"].content
    assert "shape=(4,) dtype=float64" in outputs["evil_arr"].content and "max 3" in outputs["evil_arr"].content
    assert "ndarray subclass" in outputs["evil_arr"].content
    assert outputs["evil_arr.shape"].is_error and "property of EvilArray" in outputs["evil_arr.shape"].content
    assert "dtype=object" in outputs["evil_objects"].content and "not shown" in outputs["evil_objects"].content
    assert "flux: float64, obj: object" in outputs["evil_df"].content and "2.0" in outputs["evil_df"].content
    assert "Evil()" not in outputs["evil_df"].content


SECRETS = '''
import os, sys, subprocess
env = os.environ
API_TOKEN = "tok-SECRET-ONE"
cfg = {"db_password": "pw-SECRET-TWO", "host": "db.example.org"}
proc = subprocess.CompletedProcess(["true"], 0, stdout="out-SECRET-THREE")
nested = [{"aws_secret_access_key": "aws-SECRET-FOUR"}]
flux = [1.0, 2.5]
class Holder:
    def __init__(self):
        self.api_key = "key-SECRET-FIVE"
        self.band = "r"
holder = Holder()
'''
SECRET_VALUES = ["tok-SECRET-ONE", "pw-SECRET-TWO", "out-SECRET-THREE", "aws-SECRET-FOUR", "key-SECRET-FIVE"]
SECRET_NAMES = ["os", "sys", "subprocess", "env", "API_TOKEN", "cfg", "proc", "nested", "flux", "Holder", "holder"]


def test_the_listing_hides_values_that_may_hold_secrets(load, monkeypatch) -> None:
    monkeypatch.setenv("ASTRO_TEST_CREDENTIAL", "env-SECRET-SIX")
    ip = load()
    ip.run_cell(SECRETS)
    try:
        listing = ip.run_line_magic("astro", "kernel_inspect")
        holder = ip.run_line_magic("astro", "kernel_inspect name=holder")
        answers: list[str] = []
        monkeypatch.setattr("builtins.input", lambda prompt="": answers.append(prompt) or "n")
        paths = {name: ip.run_line_magic("astro", f"kernel_inspect name={name}")
                 for name in ["env", "API_TOKEN", "cfg", "proc", "nested", "holder.api_key", "os.environ", "sys.argv"]}
    finally:
        _clean(ip, SECRET_NAMES)
    rows = {r["name"]: r for r in listing.data["variables"]}
    for name in ["env", "API_TOKEN", "cfg", "proc", "nested"]:
        assert rows[name]["summary"].startswith("(not shown: may hold secrets"), rows[name]
    assert rows["flux"]["summary"] == "len 2: [1.0, 2.5]"  # ordinary values are still shown
    for secret in [*SECRET_VALUES, "env-SECRET-SIX"]:
        assert secret not in listing.content and secret not in holder.content
    assert ".band = 'r'" in holder.content and "looks like a secret" in holder.content
    assert len(answers) == len(paths)  # every one of them asked; every one denied
    for name, result in paths.items():
        assert result.is_error and "was not shown: it may hold secrets" in result.content, (name, result.content)
        for secret in [*SECRET_VALUES, "env-SECRET-SIX"]:
            assert secret not in result.content
    assert "the process environment" in paths["env"].content
    assert "'db_password'" in paths["cfg"].content and "(*password*)" not in paths["cfg"].content
    assert "'subprocess' module" in paths["proc"].content


def _stored_bytes(home: Path) -> bytes:
    return b"".join(p.read_bytes() for p in home.rglob("*") if p.is_file())


def test_a_secret_reaches_the_model_the_store_and_the_log_only_after_allow(load, llm_env, project: Path,
                                                                        monkeypatch, capsys) -> None:
    import os

    monkeypatch.setenv("ASTRO_TEST_CREDENTIAL", "env-SECRET-SIX")
    home = Path(os.environ["ASTRO_HOME"])
    ip = load()
    ip.run_cell(SECRETS)
    try:
        llm_env.script(Turn.calls_(("kernel_inspect", {"name": "os.environ"}), ("kernel_inspect", {"name": "API_TOKEN"})),
                       Turn.say("I was not allowed to look."))
        prompts: list[str] = []
        monkeypatch.setattr("builtins.input", lambda prompt="": prompts.append(prompt) or "n")
        denied = ip.run_cell_magic("astro", "", "what is in my environment?")
        shown = capsys.readouterr().out
        assert denied.reason == "finished" and len(prompts) == 2
        flat = "".join(shown.split())  # the question is wrapped at the prompt width
        assert "kernel_inspectwantstoshow`os.environ`,whichmayholdsecrets(itistheprocessenvironment" in flat
        assert "wantstoshow`API_TOKEN`" in flat and "writtentoitsexportedlog" in flat
        sent = str(llm_env.chat_requests[-1]["messages"])
        assert "was not shown: it may hold secrets" in sent
        ip.run_line_magic("astro", f"export -o {project / 'denied.ipynb'}")
        log_text = (project / "denied.ipynb").read_text()
        for secret in ("env-SECRET-SIX", "tok-SECRET-ONE"):
            assert secret not in sent and secret not in log_text
            assert secret.encode() not in _stored_bytes(home), f"{secret} reached the store without an Allow"

        # the same with Allow: the value is shown (so the checks above could have seen it)
        llm_env.script(Turn.call("kernel_inspect", {"name": "API_TOKEN"}), Turn.say("Seen."))
        monkeypatch.setattr("builtins.input", lambda prompt="": "y")
        allowed = ip.run_cell_magic("astro", "", "show the token")
        assert allowed.reason == "finished"
        assert "tok-SECRET-ONE" in str(llm_env.chat_requests[-1]["messages"])
    finally:
        _clean(ip, SECRET_NAMES)


def test_always_covers_one_name_and_deny_mode_refuses(load, monkeypatch) -> None:
    ip = load()
    ip.run_cell(SECRETS)
    try:
        answers = iter(["always"])
        asked: list[str] = []
        monkeypatch.setattr("builtins.input", lambda prompt="": asked.append(prompt) or next(answers, "n"))
        first = ip.run_line_magic("astro", "kernel_inspect name=API_TOKEN")
        again = ip.run_line_magic("astro", "kernel_inspect name=API_TOKEN")
        other = ip.run_line_magic("astro", "kernel_inspect name=cfg")
    finally:
        _clean(ip, SECRET_NAMES)
    assert "tok-SECRET-ONE" in first.content and "tok-SECRET-ONE" in again.content
    assert other.is_error and "pw-SECRET-TWO" not in other.content
    assert len(asked) == 2  # API_TOKEN once (then "always" for that name), cfg asked anew
    assert "[y/N/always (API_TOKEN only)]" in asked[0]  # the prompt says what "always" covers


@pytest.mark.parametrize("mode", ["deny"])
def test_permission_mode_deny_refuses_without_asking(load, monkeypatch, mode: str) -> None:
    monkeypatch.setenv("ASTRO_PERMISSION_MODE", mode)
    ip = load()
    ip.run_cell(SECRETS)
    try:
        monkeypatch.setattr("builtins.input", lambda prompt="": pytest.fail("asked in permission mode deny"))
        result = ip.run_line_magic("astro", "kernel_inspect name=API_TOKEN")
    finally:
        _clean(ip, SECRET_NAMES)
    assert result.is_error and "tok-SECRET-ONE" not in result.content and "permission mode 'deny'" in result.content


def test_the_exported_log_shows_what_the_agent_saw_and_never_a_denied_value(load, llm_env, project: Path,
                                                                           monkeypatch) -> None:
    ip = load()
    ip.run_cell(SECRETS)
    try:
        llm_env.script(Turn.calls_(("kernel_inspect", {"name": "cfg"}), ("kernel_inspect", {"name": "flux"})),
                       Turn.say("Denied."))
        monkeypatch.setattr("builtins.input", lambda prompt="": "n")
        ip.run_cell_magic("astro", "", "look at cfg and flux")
        ip.run_line_magic("astro", f"export -o {project / 'log.ipynb'}")
    finally:
        _clean(ip, SECRET_NAMES)
    nb = nbformat.read(project / "log.ipynb", as_version=4)
    text = "\n".join(c.source for c in nb.cells)
    assert "pw-SECRET-TWO" not in text and "was not shown" in text
    # at the top: the variables came from the user's own cells, which the log lacks
    assert nb.cells[1].cell_type == "markdown" and "user's own cells, which this log does not contain" in nb.cells[1].source
    # what kernel_inspect showed the agent, as Markdown (not "recorded as text, not code")
    looked = [c.source for c in nb.cells if c.source.startswith("*The agent looked at the variable")]
    assert len(looked) == 2 and "flux: [1.0, 2.5]" in looked[1] and "(it was not shown)" in looked[0]
    assert "recorded as text, not code" not in text
