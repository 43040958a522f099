"""One list of refused system folders (issue 19 §3): `llmem_hooks.paths.SYSTEM_DIRS`.

The OpenCode adapter used to keep its own, shorter list (no /lib, /run, /srv, /snap...),
so a configured OpenCode DB under /srv or /run was opened while a config path there was
refused. Both now ask `paths.is_system_path`. Nothing here touches the real folders:
the paths checked do not exist (a missing DB file is accepted before it is opened).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from adapters.opencode import validate_db_path
from llmem_hooks.errors import ValidationError
from llmem_hooks.paths import SYSTEM_DIR_EXCEPTIONS, SYSTEM_DIRS, check_user_path

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("folder", SYSTEM_DIRS)
def test_opencode_db_path_and_config_path_refuse_the_same_folders(folder: str) -> None:
    path = f"{folder}/llmem-test-does-not-exist/opencode.db"
    with pytest.raises(ValueError, match="system directory"):
        validate_db_path(path)
    with pytest.raises(ValidationError, match="system folder"):
        check_user_path(path, "file", "test")


@pytest.mark.parametrize("folder", ["/srv", "/run", "/lib", "/snap"])
def test_opencode_db_under_folders_only_the_adapter_allowed_is_refused(folder: str) -> None:
    with pytest.raises(ValueError, match="system directory"):
        validate_db_path(f"{folder}/llmem-test-does-not-exist/opencode.db")


@pytest.mark.parametrize("folder", SYSTEM_DIR_EXCEPTIONS)
def test_temp_and_runtime_folders_stay_allowed_for_both(folder: str) -> None:
    path = f"{folder}/llmem-test-does-not-exist/opencode.db"
    assert validate_db_path(path) == Path(path)
    assert check_user_path(path, "file", "test") == Path(path)


def test_no_second_list_of_system_folders_in_the_code() -> None:
    """No tuple/list/set literal naming /etc outside paths.py."""
    found = []
    for base in (ROOT / "llmem_hooks", ROOT / "adapters"):
        for path in base.rglob("*.py"):
            if path == ROOT / "llmem_hooks" / "paths.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Tuple | ast.List | ast.Set) and any(
                    isinstance(e, ast.Constant) and e.value in ("/etc", "/usr", "/proc")
                    for e in node.elts
                ):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []
