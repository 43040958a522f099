"""The public surface of ``llmem_hooks`` (httpx style): ``__all__`` is exactly what the
package exports, every name resolves, and the lazy table agrees with the imports that type
checkers read."""

from __future__ import annotations

import ast
import subprocess
import sys
import types
from pathlib import Path

import llmem_hooks

INIT = Path(llmem_hooks.__file__)
# Names the module needs for itself (imports), not part of the surface.
PLUMBING = {"annotations", "TYPE_CHECKING", "Any"}


def _type_checking_imports() -> dict[str, str]:
    """name -> module of the ``from .module import name as name`` lines under
    ``if TYPE_CHECKING:``."""
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom), ast.unparse(stmt)
                assert stmt.level == 1 and stmt.module, ast.unparse(stmt)
                for alias in stmt.names:
                    # "X as X": an explicit re-export, even under mypy --no-implicit-reexport
                    assert alias.asname == alias.name, ast.unparse(stmt)
                    found[alias.name] = stmt.module
    return found


def test_all_is_the_public_names() -> None:
    for name in llmem_hooks.__all__:  # resolve every lazy name first
        getattr(llmem_hooks, name)
    public = {
        name
        for name, value in vars(llmem_hooks).items()
        if not name.startswith("_")
        and name not in PLUMBING
        and not isinstance(value, types.ModuleType)  # submodules loaded by the lookups
    }
    assert set(llmem_hooks.__all__) == public | {"__version__"}
    assert len(llmem_hooks.__all__) == len(set(llmem_hooks.__all__))


def test_every_name_resolves_to_its_module() -> None:
    for name, module in llmem_hooks._EXPORTS.items():
        value = getattr(llmem_hooks, name)
        owner = sys.modules[f"llmem_hooks.{module}"]
        assert getattr(owner, name) is value, name
    assert isinstance(llmem_hooks.__version__, str)


def test_type_checking_imports_match_the_lazy_table() -> None:
    assert _type_checking_imports() == llmem_hooks._EXPORTS


def test_all_is_derived_from_the_lazy_table() -> None:
    assert sorted(llmem_hooks.__all__) == sorted([*llmem_hooks._EXPORTS, "__version__"])


def test_star_import_and_dir_in_a_fresh_interpreter() -> None:
    probe = (
        "import llmem_hooks\n"
        "names = set(dir(llmem_hooks))\n"
        "ns = {}\n"
        "exec('from llmem_hooks import *', ns)\n"
        "print(sorted(set(llmem_hooks.__all__) - names))\n"
        "print(sorted(set(llmem_hooks.__all__) - set(ns)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    ).stdout.split("\n")
    assert out[0] == "[]"  # dir() lists the lazy names before they are loaded
    assert out[1] == "[]"


def test_unknown_name_is_an_attribute_error() -> None:
    try:
        llmem_hooks.NoSuchThing  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("llmem_hooks.NoSuchThing resolved")
