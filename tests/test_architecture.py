"""The shape of the code, checked: module sizes, no import cycles, layers imported one way.

Why a test: the reshape of issue 10 only stays done if the next feature cannot quietly
undo it (a 1,500-line file again, the store importing the sidecar, a cycle through a
lazy import). The graph is read from the source with `ast`, so nothing is imported.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 900

# The layers, lowest first. A module may import from its own layer or a lower one only.
# (Module names are relative to llmem_hooks; adapters/ is llmem_hooks.adapters.)
LAYERS: tuple[tuple[str, ...], ...] = (
    # foundations: no knowledge of stores, agents or models
    (
        "errors",
        "timestamps",
        "home",
        "paths",
        "faults",
        "redact",
        "url_validate",
        "registry",
        "config",
        "progress",
        "markers",
    ),
    # the memory database, the words it is searched with, what a session event is
    ("store", "text", "project", "events", "evidence"),
    # the local model, search, extraction
    ("model", "search", "extraction"),
    # the agents' stores (read only) and the session lifecycle
    ("adapters", "session"),
    # what is built on a store and its sessions: the query service, the dream cycle, the viewer
    ("service", "dream", "viewer", "team"),
    # the sidecar: watches the agents, runs the hooks, serves the query socket
    ("sidecar",),
    # entry points: the agents' side (Copilot hook, MCP server, install) and the CLI
    ("agents", "cli", "__init__", "__main__", "plugin"),
)


def _modules() -> dict[str, Path]:
    """Dotted name (without the ``llmem_hooks.`` prefix) -> file, adapters included."""
    found: dict[str, Path] = {}
    for base, prefix in ((ROOT / "llmem_hooks", ""), (ROOT / "adapters", "adapters.")):
        for path in base.rglob("*.py"):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = prefix + ".".join(parts) if parts else prefix.rstrip(".") or "__init__"
            found[name] = path
    return found


def _top(name: str) -> str:
    return name.split(".")[0]


def _imports(name: str, path: Path, known: set[str], *, lazy: bool = True) -> set[str]:
    """Modules of ours that ``name`` imports, at any depth of its code (lazy imports in
    functions count too unless ``lazy`` is False; imports under ``if TYPE_CHECKING`` do
    not)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
        if not lazy and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            return
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".") if package else []
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                target = ".".join([*base, *(node.module.split(".") if node.module else [])])
            elif node.module and node.module.startswith("llmem_hooks"):
                target = node.module.removeprefix("llmem_hooks").lstrip(".")
            else:
                return
            for alias in node.names:
                full = f"{target}.{alias.name}" if target else alias.name
                out.add(full if full in known else target)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("llmem_hooks."):
                    out.add(alias.name.removeprefix("llmem_hooks."))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return {m for m in out if m in known and m != name}


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    known = set(mods)
    return {name: _imports(name, path, known) for name, path in mods.items()}


def test_no_module_over_900_lines() -> None:
    big = {
        name: n
        for name, path in _modules().items()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert big == {}


def test_no_import_cycles_between_top_level_modules() -> None:
    """Between top-level modules and packages (`__init__` re-exports are excluded; the
    modules inside one package are checked by `test_no_import_cycles_inside_any_package`)."""
    edges: dict[str, set[str]] = {}
    for name, deps in _graph().items():
        if name == "__init__":
            continue
        src = _top(name)
        edges.setdefault(src, set()).update(
            _top(d) for d in deps if _top(d) != src and d != "__init__"
        )
    cycle = _cycle(edges)
    assert cycle is None, " -> ".join(cycle)


def test_layers_are_imported_one_way() -> None:
    rank = {name: i for i, layer in enumerate(LAYERS) for name in layer}
    unplaced = sorted({_top(n) for n in _graph()} - set(rank))
    assert unplaced == [], f"place these modules in LAYERS: {unplaced}"
    upward = sorted(
        f"{name} -> {dep}"
        for name, deps in _graph().items()
        for dep in deps
        if rank[_top(dep)] > rank[_top(name)]
    )
    assert upward == []


def test_no_script_or_test_module_shadows_the_standard_library() -> None:
    """bench/ and tests/ go on sys.path: a ``bench/secrets.py`` once replaced the standard
    ``secrets`` for every later import in the test run (the MCP SDK's among them)."""
    rooms = [p for p in (ROOT / "tests").iterdir() if p.is_dir() and p.name != "fixtures"]
    folders = [ROOT / "bench", ROOT / "tests", *rooms]
    names = {p.stem for folder in folders for p in folder.glob("*.py")}
    names |= {p.name for p in rooms}  # tests/ is on sys.path: each room is importable too
    assert not names & set(sys.stdlib_module_names)


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    seen: dict[str, int] = {}
    stack: list[str] = []

    def walk(node: str) -> list[str] | None:
        seen[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if seen.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in seen and (cycle := walk(nxt)):
                return cycle
        stack.pop()
        seen[node] = 2
        return None

    for node in sorted(edges):
        if node not in seen and (cycle := walk(node)):
            return cycle
    return None


def test_no_import_cycles_inside_any_package() -> None:
    """Within each package, its modules import each other one way (issue 19): a cycle
    hidden by binding one module's functions into another's class, or by importing a
    command module at the bottom of the module it imports back, fails here. Module-level
    imports only; ``TYPE_CHECKING`` imports and the package's ``__init__`` are left out."""
    mods = _modules()
    known = set(mods)
    packages = {n for n, p in mods.items() if p.name == "__init__.py" and n != "__init__"}
    cycles = []
    for package in sorted(packages):
        members = {n for n in mods if n.rpartition(".")[0] == package and n not in packages}
        edges = {
            n: {d for d in _imports(n, mods[n], known, lazy=False) if d in members} for n in members
        }
        if cycle := _cycle(edges):
            cycles.append(" -> ".join(cycle))
    assert cycles == []


def test_no_module_outside_the_store_touches_its_private_helpers() -> None:
    """The store's one seam is its `Database` (``store.db``), handed to the side-table
    functions as an argument. Outside ``llmem_hooks/store/`` nothing uses the connection,
    lock or fetch helpers of a store: not the old private ones (``store._conn``,
    ``._lock``, ``._fetchone``, ``._fetchall``) and not those of ``store.db`` (SQL, or a
    lock taken from outside, belongs in the store's own modules)."""
    import re

    private = re.compile(r"(?<!\bself)\._(conn|lock|fetchone|fetchall)\b")
    seam = re.compile(r"\.db\.(conn|lock|fetchone|fetchall|execute|transaction|locked)\b")
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for base in (ROOT / "llmem_hooks", ROOT / "adapters")
        for path in sorted(base.rglob("*.py"))
        if "store" not in path.relative_to(base).parts[:1]
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if private.search(line) or seam.search(line)
    ]
    assert offenders == []


def test_tests_mirror_the_packages() -> None:
    """A test lives in the room of what it tests (issue 19): one folder per package of
    `llmem_hooks` (and `adapters`), `foundations/` for the flat modules, `e2e/` for the
    real agents; at the top only the checks of the repository as a whole."""
    packages = {p.name for p in (ROOT / "llmem_hooks").iterdir() if (p / "__init__.py").exists()}
    packages |= {"adapters"}
    rooms = {p.name for p in (ROOT / "tests").iterdir() if p.is_dir()} - {"__pycache__"}
    assert rooms - packages <= {"foundations", "e2e", "support", "fixtures"}
    top = {p.name for p in (ROOT / "tests").glob("test_*.py")}
    assert top <= {
        "test_architecture.py",
        "test_lint.py",
        "test_exports.py",
        "test_packaging.py",
        "test_leak_checks.py",
    }
