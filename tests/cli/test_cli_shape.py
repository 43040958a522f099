"""One typed config inside, and a CLI without cycles or shared state (issue 19, §3).

- The config dict exists only at the YAML edge (config.py, the Copilot hook's JSON cache)
  and at the public entry points that callers hand `load_config`'s dict; everything else
  takes `Config`, and nothing reads ``cfg["section"]["key"]``.
- `llmem_hooks.cli`: its modules import each other without a cycle (`app` registers the
  command modules, which never import it back), no module holds an instance shared by
  the others (one `Invocation` per run instead), and the package forwards no attributes.

The source is read with `ast` (nothing imported) except where the running code is the
point (a fresh interpreter for the package's attributes, the CLI itself).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_architecture import _graph

from llmem_hooks.agents import copilot_hook
from llmem_hooks.cli import main
from llmem_hooks.config import SECTIONS, Config
from llmem_hooks.session.hooks import default_adapters
from llmem_hooks.store import MemoryStore

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "llmem_hooks"

# The public entry points that still accept the config dict (tests and users' scripts
# pass `load_config`'s), each converting it at once: "file::function".
DICT_ENTRY_POINTS = {
    "config.py::coerce",
    "config.py::section_of",
    "model/embed.py::from_config",
    "model/ollama.py::from_config",
    "model/budget.py::from_config",
    "store/memories.py::from_config",
    "extraction/llm.py::build_extraction_engine",
    "agents/doctor.py::diagnose",
    "viewer/data.py::__init__",
    "dream/cycle.py::__init__",
    "dream/cycle.py::dream",
    "session/hooks.py::__init__",
    "session/hooks.py::create_session_hook_coordinator",
    "session/hooks.py::_settings",
    "service/operations.py::__init__",
    "service/operations.py::open",
    "sidecar/loop.py::__init__",
}
# Where the dict itself is read: the Copilot hook's cache (its edge, see its `Settings`).
DICT_READERS = {"agents/copilot_hook.py", "config.py"}


def _sources() -> dict[str, ast.Module]:
    return {
        str(p.relative_to(PACKAGE)): ast.parse(p.read_text(encoding="utf-8"))
        for p in sorted(PACKAGE.rglob("*.py"))
    }


def test_only_the_public_entry_points_take_a_config_dict() -> None:
    takes_dict = set()
    for rel, tree in _sources().items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for arg in [*node.args.args, *node.args.kwonlyargs]:
                text = ast.unparse(arg.annotation) if arg.annotation else ""
                if "Config" in text and ("Mapping" in text or "dict" in text):
                    takes_dict.add(f"{rel}::{node.name}")
    assert takes_dict - DICT_ENTRY_POINTS == set()


def test_no_config_section_is_read_as_a_dict() -> None:
    """``x["context"]["dir"]`` is ``config.context.dir``, except on the Copilot hook's
    cache (read once, in its `Settings`)."""
    found = []
    for rel, tree in _sources().items():
        if rel in DICT_READERS:
            continue
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Subscript)
                and isinstance(node.value, ast.Subscript)
                and isinstance(node.value.slice, ast.Constant)
                and node.value.slice.value in SECTIONS
            ):
                found.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
    assert found == []


def test_the_cli_modules_import_each_other_without_a_cycle() -> None:
    graph = {
        name: {d for d in deps if d.startswith("cli.") or d == "cli"}
        for name, deps in _graph().items()
        if name.startswith("cli.") or name == "cli"
    }
    assert graph, "no cli modules found"
    # `app` registers the command modules, none imports it (only the entry point `main`)
    back_to_app = sorted(name for name, deps in graph.items() if "cli.app" in deps)
    assert back_to_app == ["cli"]
    seen: dict[str, int] = {}

    def walk(node: str, stack: list[str]) -> list[str] | None:
        seen[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if seen.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt] if nxt in stack else [node, nxt]
            if nxt not in seen and (cycle := walk(nxt, [*stack, nxt])):
                return cycle
        seen[node] = 2
        return None

    for node in sorted(graph):
        if node not in seen:
            assert walk(node, [node]) is None


def test_no_cli_module_holds_state_shared_with_the_others() -> None:
    """No module-level instance of a class of the CLI (the per-run state is an
    `Invocation` handed to each command), so two runs in one process share nothing."""
    cli = {rel: tree for rel, tree in _sources().items() if rel.startswith("cli/")}
    classes = {
        node.name for tree in cli.values() for node in tree.body if isinstance(node, ast.ClassDef)
    }
    instances = [
        f"{rel}:{node.lineno}"
        for rel, tree in cli.items()
        for node in tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign)
        and isinstance(node.value, ast.Call)
        and ast.unparse(node.value.func).split(".")[-1] in classes
    ]
    assert instances == []


def test_the_cli_package_forwards_no_attributes() -> None:
    tree = ast.parse((PACKAGE / "cli" / "__init__.py").read_text(encoding="utf-8"))
    assert "__getattr__" not in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    probe = (
        "import json, sys, llmem_hooks.cli as cli\n"
        "print(json.dumps([hasattr(cli, 'app'), 'typer' in sys.modules]))\n"
        "import llmem_hooks.cli.app\n"
        "print(json.dumps([cli.app is sys.modules['llmem_hooks.cli.app']]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    ).stdout.splitlines()
    assert [json.loads(line) for line in out] == [[False, False], [True]]


def test_each_run_has_its_own_db_and_format(
    llmem_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--db and --json of one run do not leak into the next (typer and the fast path)."""
    other = tmp_path / "other.db"
    assert main(["--db", str(other), "--json", "store", "in the other database"]) == 0
    assert json.loads(capsys.readouterr().out)["id"]
    assert main(["store", "in the default database"]) == 0
    assert not capsys.readouterr().out.startswith("{")
    with MemoryStore(other) as st:
        assert [m["content"] for m in st.list_all()] == ["in the other database"]
    with MemoryStore(llmem_home / "memory.db") as st:
        assert [m["content"] for m in st.list_all()] == ["in the default database"]
    assert main(["--db", str(other), "--json", "list"]) == 0  # the fast path
    assert json.loads(capsys.readouterr().out)[0]["content"] == "in the other database"
    assert main(["list"]) == 0
    assert capsys.readouterr().out.strip().endswith("in the default database")


def test_default_adapters_read_the_typed_config(tmp_path: Path) -> None:
    typed = Config.from_mapping({"copilot": {"enabled": False}, "opencode": {"enabled": True}})
    assert "copilot" not in default_adapters(typed) and "opencode" in default_adapters(typed)


def test_a_hook_settings_cache_missing_a_key_is_parsed_again(llmem_home: Path) -> None:
    """The Copilot hook reads its cached dict once; a cache without a value it needs
    (damaged, or written by other code) is not trusted: config.yaml is parsed again."""
    llmem_home.mkdir(mode=0o700, parents=True)
    (llmem_home / "config.yaml").write_text("recall:\n  enabled: false\n")
    settings = copilot_hook.load_settings()
    assert settings.recall is False and settings.typed().recall.enabled is False
    cache = llmem_home / copilot_hook.SETTINGS_CACHE
    body = json.loads(cache.read_text())
    del body["config"]["recall"]
    cache.write_text(json.dumps(body))
    assert copilot_hook.load_settings().recall is False
    assert "recall" in json.loads(cache.read_text())["config"]
