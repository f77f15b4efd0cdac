"""The layout holds: no import circles inside ``src/vlm_envs``, each room imports only the rooms below
it (DESIGN.md), and a trainer's or library's package is imported only by its adapter.

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


#: The modules every room may import: the protocol, the registry and the helpers they stand on.
BASE = frozenset(
    {
        "vlm_envs",
        "protocol",
        "compat",
        "registry",
        "verify",
        "envs",
        "imaging",
        "plain_json",
        "files",
        "http_body",
        "metrics",
        "rewards",
        "episode_carrier",
        "errors",
        "snapshot",
        "state_signals",
        "credit",  # turn-level credit's arithmetic over plain turns: trainer-neutral, below every hook
    }
)
_ROLLOUT_BELOW_ADAPTERS = {"rollout.core", "rollout.engines", "rollout.episode", "rollout.executors"}
#: Room -> the rooms (besides :data:`BASE` and itself) it may import. A room missing here may import
#: nothing but :data:`BASE`. Nothing imports upward: ``eval/``, ``sft/``, ``cli/``, ``serve/`` and
#: ``interop/`` build envs through ``configured``, and no room below ``eval`` reaches into it.
MAY_IMPORT: dict[str, frozenset[str]] = {
    "vlm_envs": frozenset({"gym"}),
    "data": frozenset({"env"}),
    "rollout.core": frozenset(),
    "rollout.engines": frozenset({"rollout.core"}),
    "rollout.episode": frozenset({"rollout.core", "rollout.engines"}),
    "rollout.executors": frozenset({"rollout.core", "rollout.engines", "rollout.episode"}),
    "rollout": frozenset(_ROLLOUT_BELOW_ADAPTERS),
    "rollout.slime": frozenset(_ROLLOUT_BELOW_ADAPTERS),
    "rollout.verl": frozenset(_ROLLOUT_BELOW_ADAPTERS),
    "rollout.trl": frozenset(_ROLLOUT_BELOW_ADAPTERS),
    "serve": frozenset({"configured"}),
    "remote": frozenset({"serve"}),
    "interop": frozenset({"configured", "datasets", "remote"}),
    "datasets": frozenset({"configured", "data", "rollout.executors"}),
    "eval": frozenset({"configured", "datasets", "report", *_ROLLOUT_BELOW_ADAPTERS}),
    "sft": frozenset({"configured", "rollout.core"}),
    "testing": frozenset({"rollout.core", "rollout.engines"}),
    "cli": frozenset({"configured", "checker", "datasets", "eval", "serve", "sft", "report"}),
}
#: Third-party packages only their adapters (and modules under them) may import.
ADAPTERS: dict[str, tuple[str, ...]] = {
    "slime": ("vlm_envs.rollout.slime",),
    "verl": ("vlm_envs.rollout.verl",),
    "trl": ("vlm_envs.rollout.trl", "vlm_envs.interop.trl_environment", "vlm_envs.sft.trl_template"),
    "verifiers": ("vlm_envs.interop.verifiers",),
    "ray": (
        "vlm_envs.rollout.executors.ray_",
        "vlm_envs.eval.ray_episodes",
        "vlm_envs.datasets.on_ray",
    ),
}


#: verl's room beside its agent loop: the advantage estimator and the V1 trainers that feed it.
_VERL_ROOM = ("verl_gigpo", "verl_trainer")


def room(module: str, modules: dict[str, Path] | None = None) -> str:
    """The room of a package module: ``rollout.core`` for the episode core's files, ``env`` for a
    concrete env's package, ``envs`` for the modules every env shares, else the first part."""
    parts = module.split(".")[1:]
    if not parts:
        return "vlm_envs"
    if parts[0] == "rollout":
        if len(parts) == 1:
            return "rollout"
        if parts[1] in ("engines", "executors", "slime", "verl", "trl", "episode"):
            return f"rollout.{parts[1]}"
        if parts[1] in _VERL_ROOM:
            return "rollout.verl"
        return "rollout.core"
    if parts[0] == "envs" and len(parts) > 1:
        shared = (PACKAGE_ROOT / "envs" / f"{parts[1]}.py").is_file()
        return "envs" if shared else "env"
    if parts[0].startswith("remote"):  # RemoteEnv, its wire format and its server's location
        return "remote"
    return parts[0]


def layout_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import in ``graph`` that goes to a room its module's room may not import."""
    wrong = []
    for module, imported in graph.items():
        here = room(module)
        allowed = BASE | MAY_IMPORT.get(here, frozenset()) | {here}
        for target in imported:
            there = room(target)
            if there not in allowed:
                wrong.append(f"{module} -> {target} ({here} may not import {there})")
            elif here == there == "env" and target.split(".")[2] != module.split(".")[2]:
                wrong.append(f"{module} -> {target} (an env imports another env)")
    return sorted(wrong)


def test_each_room_imports_only_the_rooms_below_it():
    wrong = layout_violations(import_graph())
    assert not wrong, "\n".join(wrong)


def _third_party_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_a_trainers_package_is_imported_only_by_its_adapter_and_no_env_imports_torch():
    wrong = []
    for module, path in package_modules().items():
        imported = _third_party_imports(path)
        for package, owners in ADAPTERS.items():
            if package in imported and not module.startswith(owners):
                wrong.append(f"{module} imports {package}")
        if room(module) in ("env", "envs") and imported & {"torch", "transformers"}:
            wrong.append(f"{module} imports torch or transformers")
    assert not wrong, "\n".join(sorted(wrong))


def test_the_layout_check_sees_a_room_importing_upward():
    assert room("vlm_envs.rollout.engines.http") == "rollout.engines"
    assert room("vlm_envs.rollout.codec") == "rollout.core" and room("vlm_envs.rollout") == "rollout"
    assert room("vlm_envs.rollout.verl_gigpo") == room("vlm_envs.rollout.verl_trainer") == "rollout.verl"
    assert room("vlm_envs.envs.sokoban.env") == "env" and room("vlm_envs.envs.config") == "envs"
    upward = {
        "vlm_envs.rollout.codec": {"vlm_envs.rollout.episode"},
        "vlm_envs.rollout.trl.processor": {"vlm_envs.eval.processors"},
        "vlm_envs.sft.sources": {"vlm_envs.eval.config"},
        "vlm_envs.envs.sokoban.env": {"vlm_envs.envs.jigsaw.env", "vlm_envs.envs.config"},
        "vlm_envs.eval.runner": {"vlm_envs.configured", "vlm_envs.rollout.executors.slots"},
    }
    assert layout_violations(upward) == [
        "vlm_envs.envs.sokoban.env -> vlm_envs.envs.jigsaw.env (an env imports another env)",
        "vlm_envs.rollout.codec -> vlm_envs.rollout.episode (rollout.core may not import rollout.episode)",
        "vlm_envs.rollout.trl.processor -> vlm_envs.eval.processors (rollout.trl may not import eval)",
        "vlm_envs.sft.sources -> vlm_envs.eval.config (sft may not import eval)",
    ]
