"""The package's import graph: no cycles, and the core never imports a front end.

The core (agent/, services/, store/, llm/) is shared by the server, the kernel and the CLI;
an import from a front end back into it ties every front end to the others and makes import
order matter.  Only module-level imports count: an import inside a function runs later, so it
cannot deadlock at import time (those are listed by ``lazy_imports`` for inspection).
"""

from __future__ import annotations

import ast
import functools
import gc
from pathlib import Path

import astro_jupyter

PACKAGE_DIR = Path(astro_jupyter.__file__).resolve().parent
PACKAGE = "astro_jupyter"
CORE = ("agent", "services", "store", "llm")
FRONT_ENDS = ("server", "kernel", "cli", "acp")


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE_DIR.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@functools.cache
def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE_DIR.rglob("*.py"))}


@functools.cache
def _tree(path: Path) -> ast.Module:
    """Each module is parsed once per test session (several tests walk every module).

    With the garbage collector off: a collection inside ``compile()`` ran the finalizer of an object an
    earlier test in the same process left behind (an asyncio subprocess transport whose loop was closed);
    its RuntimeError made CPython 3.11's AST builder fail with "SystemError: AST constructor recursion
    depth mismatch" (CPython gh-106905), seen once with two xdist workers, whose test order differs."""
    source = path.read_text(encoding="utf-8")
    collecting = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(source, str(path))
    finally:
        if collecting:
            gc.enable()


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(modules: dict[str, Path], *, lazy: bool) -> dict[str, set[str]]:
    """Module -> the package modules it imports (module level, or only inside functions)."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = _tree(path)
        is_package = path.name == "__init__.py"
        found: set[str] = set()

        def visit(node: ast.AST, in_function: bool) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and _is_type_checking(child):
                    continue  # annotations only, never executed
                inner = in_function or isinstance(
                    child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
                )
                if isinstance(child, (ast.Import, ast.ImportFrom)) and inner == lazy:
                    targets: list[str] = []
                    if isinstance(child, ast.Import):
                        targets = [a.name for a in child.names]
                    else:
                        base = _resolve(name, is_package, child)
                        for alias in child.names:
                            sub = f"{base}.{alias.name}"
                            targets.append(sub if sub in modules else base)
                    for target in targets:
                        while target and target not in modules:
                            target = target.rpartition(".")[0]
                        if target.startswith(PACKAGE) and target != name:
                            found.add(target)
                visit(child, inner)

        visit(tree, False)
        graph[name] = found
    return graph


def _package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _ancestors(module: str) -> set[str]:
    """Importing a.b.c runs a/__init__ and a/b/__init__ first: edges to them are implied."""
    parts = module.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    import sys

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for v in sorted(graph):
            if v not in index:
                strong(v)
    finally:
        sys.setrecursionlimit(limit)
    return out


@functools.cache
def _graph(lazy: bool) -> dict[str, set[str]]:
    return _imports(_modules(), lazy=lazy)


def module_graph() -> dict[str, set[str]]:
    return _graph(False)


def lazy_imports() -> dict[str, set[str]]:
    return {k: v for k, v in _graph(True).items() if v}


def test_graph_sees_known_edges() -> None:
    """The scanner itself works: it finds imports that certainly exist."""
    graph = module_graph()
    assert "astro_jupyter.errors" in graph["astro_jupyter.agent.executor"] or any(
        "astro_jupyter.errors" in deps for deps in graph.values()
    )
    assert "astro_jupyter.config" in graph["astro_jupyter.server.app"]
    assert len(graph) > 100


def _pruned(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    # A package's __init__ imports its submodules and they import it back through
    # `from . import x`; those edges are Python's own loading order, not a cycle between
    # two modules' jobs, so edges to a module's enclosing packages are dropped.
    return {m: {d for d in deps if d not in _ancestors(m)} for m, deps in graph.items()}


def test_no_module_level_import_cycles() -> None:
    cycles = _cycles(_pruned(module_graph()))
    assert cycles == [], "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_no_cycles_hidden_behind_function_level_imports() -> None:
    """A lazy import that only exists to dodge a cycle is still a cycle between two jobs."""
    graph = module_graph()
    lazy = lazy_imports()
    both = {m: graph[m] | lazy.get(m, set()) for m in graph}
    cycles = _cycles(_pruned(both))
    assert cycles == [], "cycles through lazy imports:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_cycle_finder_finds_a_cycle() -> None:
    """Guards the guard: a two-module and a three-module loop are reported, a chain is not."""
    graph = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c"}, "x": {"y"}, "y": set()}
    assert sorted(_cycles(graph)) == [["a", "b"], ["c", "d", "e"]]


def test_core_imports_no_front_end() -> None:
    offenders = []
    for lazy in (False, True):
        for module, deps in _graph(lazy).items():
            if _package_of(module) not in CORE:
                continue
            for dep in deps:
                top = _package_of(dep)
                if top in FRONT_ENDS or top.startswith("cli"):
                    offenders.append(f"{module} -> {dep}{' (lazy)' if lazy else ''}")
    assert offenders == [], "core imports a front end:\n" + "\n".join(sorted(offenders))


def test_export_imports_no_front_end() -> None:
    """export.py is shared by the CLI and the server; it must not pull the kernel in."""
    name = "astro_jupyter.export"
    deps = module_graph()[name] | lazy_imports().get(name, set())
    assert not [d for d in deps if _package_of(d) in FRONT_ENDS], deps


# -- the application layer (astro_jupyter/app/) --------------------------------------------------
APP = "app"
# What the application layer offers front ends; a front end reaching for these directly would
# repeat its ownership checks and validation (issue 14, item 1).
BEHIND_APP = ("astro_jupyter.store", "astro_jupyter.agent.executor", "astro_jupyter.agent.tools.base",
              "astro_jupyter.services.container")
REPOSITORIES = frozenset({"sessions", "messages", "runs", "history", "library", "papers", "notes", "chunks", "audit",
                          "memories", "tasks", "db", "bookmarklets"})


def test_app_imports_no_front_end() -> None:
    """app/ is what every front end calls; it must not depend on any of them (nor on Jupyter or tornado)."""
    offenders = []
    for lazy in (False, True):
        for module, deps in _graph(lazy).items():
            if _package_of(module) != APP:
                continue
            offenders += [f"{module} -> {d}{' (lazy)' if lazy else ''}" for d in deps if _package_of(d) in FRONT_ENDS]
    assert offenders == [], "app/ imports a front end:\n" + "\n".join(sorted(offenders))
    for path in (PACKAGE_DIR / APP).rglob("*.py"):
        for node in ast.walk(_tree(path)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            bad = [n for n in names if n.split(".")[0] in ("tornado", "jupyter_server", "IPython", "ipywidgets")]
            assert not bad, f"{path} imports {bad}"


def _front_end_modules() -> dict[str, Path]:
    return {m: p for m, p in _modules().items() if _package_of(m) in FRONT_ENDS}


def test_front_ends_do_not_reach_past_the_app_layer() -> None:
    """Server, kernel and CLI import no repository, executor, ToolContext or service container
    (annotations excepted): sessions, runs, direct tool calls and the library go through app/."""
    offenders = []
    fronts = set(_front_end_modules())
    for lazy in (False, True):
        for module, deps in _graph(lazy).items():
            if module not in fronts:
                continue
            for dep in deps:
                if any(dep == b or dep.startswith(b + ".") for b in BEHIND_APP):
                    offenders.append(f"{module} -> {dep}{' (lazy)' if lazy else ''}")
    assert offenders == [], "a front end bypasses app/:\n" + "\n".join(sorted(offenders))


def _repository_calls(tree: ast.AST) -> list[str]:
    """``services.sessions``, ``x.services.runs`` ...: a repository reached through a service container."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in REPOSITORIES:
            owner = node.value
            name = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else ""
            if name in ("services", "_services"):
                found.append(f"{name}.{node.attr} (line {node.lineno})")
    return found


def test_front_ends_call_no_repository_through_the_container() -> None:
    offenders = []
    for module, path in _front_end_modules().items():
        offenders += [f"{module}: {c}" for c in _repository_calls(_tree(path))]
    assert offenders == [], "a front end calls a repository directly (use astro_jupyter.app):\n" + "\n".join(offenders)


def test_front_end_rules_catch_offenders() -> None:
    """Guards the guards: the repository scan sees both spellings, and ``cli/`` counts as a front end."""
    tree = ast.parse("async def f(rt):\n    s = await rt.services()\n    await s.sessions.list()\n"
                     "    await services.sessions.list()\n    await self.services.runs.get('r')\n")
    assert _repository_calls(tree) == ["services.sessions (line 4)", "services.runs (line 5)"]
    assert "astro_jupyter.cli.ask" in _front_end_modules() and "astro_jupyter.kernel.magics" in _front_end_modules()
    assert "astro_jupyter.cli" in _modules() and not (PACKAGE_DIR / "cli.py").exists()
