"""No import circles inside ``src/vlm_envs``: a circle says some module's job is in the wrong room.

Every module is parsed (nothing is imported) and every intra-package import counts, function-level
ones included: a local import only postpones a circle to the first call, it does not remove it. The
implicit import of a parent package (``import vlm_envs.a.b`` runs ``vlm_envs/a/__init__.py`` first)
is not an edge: Python initialises a parent before its children by design, so ``vlm_envs/__init__.py``
re-exporting ``vlm_envs.registry`` is no circle.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[1] / "src" / "vlm_envs"


def package_modules(root: Path = PACKAGE_ROOT) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` under ``root``."""
    modules = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of ``name`` that is a module of the package."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules ``module`` imports anywhere in its body."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str | None] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(_known(alias.name, modules) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            # ``from pkg import submodule`` imports the submodule; ``from mod import name`` the module
            found.update(
                _known(f"{source}.{alias.name}", modules) or _known(source, modules) for alias in node.names
            )
    return {m for m in found if m is not None and m != module}


def import_graph() -> dict[str, set[str]]:
    modules = package_modules()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as a path ``[a, b, ..., a]``, or ``None``."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def test_the_package_has_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_the_walker_sees_every_import_form(tmp_path: Path):
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "sub" / "__init__.py").write_text("from pkg.sub import b\n")
    (root / "a.py").write_text("def f():\n    from .sub.b import g  # a local import counts\n")
    (root / "sub" / "b.py").write_text("import pkg.c\n")
    (root / "c.py").write_text("from . import a\n")
    modules = package_modules(root)
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}
    assert graph["pkg.a"] == {"pkg.sub.b"} and graph["pkg.sub"] == {"pkg.sub.b"}
    assert graph["pkg.c"] == {"pkg.a"} and graph["pkg.sub.b"] == {"pkg.c"}
    assert find_cycle(graph) == ["pkg.a", "pkg.sub.b", "pkg.c", "pkg.a"]
    del graph["pkg.c"]
    assert find_cycle(graph) is None


def _reach(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every package module ``start`` imports, directly or through others."""
    seen, pending = set(), [start]
    while pending:
        for nxt in graph.get(pending.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                pending.append(nxt)
    return seen


def test_serve_and_remote_know_the_registry_and_the_protocol_never_the_rollout_or_a_trainer():
    graph = import_graph()
    rooms = [m for m in graph if m.startswith("vlm_envs.serve")] + ["vlm_envs.remote"]
    forbidden = ("vlm_envs.rollout", "vlm_envs.eval", "vlm_envs.cli", "vlm_envs.interop", "vlm_envs.sft")
    for module in rooms:
        bad = sorted(m for m in _reach(graph, module) if m.startswith(forbidden))
        assert not bad, f"{module} reaches {bad}"
    assert "vlm_envs.registry" in _reach(graph, "vlm_envs.serve.worker")
