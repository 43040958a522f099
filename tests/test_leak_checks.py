"""The autouse leak checks of tests/conftest.py catch what they promise: a test that leaves
a thread running or a MemoryStore open fails (at teardown); one that cleans up passes; a
module-scoped store is exempt. Run in a child pytest over a copy of the conftest."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

CONFTEST = Path(__file__).with_name("conftest.py")

CASES = """
import threading

import pytest

from llmem_hooks import MemoryStore


def test_open_store_is_reported(tmp_path):
    MemoryStore(tmp_path / "left-open.db")


def test_closed_store_is_fine(tmp_path):
    with MemoryStore(tmp_path / "closed.db") as st:
        st.add("fact", "closed again")


def test_running_thread_is_reported():
    stop = threading.Event()
    threading.Thread(target=stop.wait, args=(30,), name="left-running", daemon=True).start()


def test_finishing_thread_gets_its_grace():
    threading.Thread(target=__import__("time").sleep, args=(0.3,), daemon=True).start()


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory):
    with MemoryStore(tmp_path_factory.mktemp("shared") / "m.db") as st:
        yield st


def test_module_store_first(shared_store):
    shared_store.add("fact", "one module-wide store")


def test_module_store_second(shared_store):
    assert shared_store.count() == 1
"""


def test_leaks_fail_and_clean_tests_pass(tmp_path: Path) -> None:
    shutil.copy(CONFTEST, tmp_path / "conftest.py")
    (tmp_path / "test_cases.py").write_text(CASES)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert "ERROR test_cases.py::test_open_store_is_reported" in out
    assert "left 1 MemoryStore(s) open" in out and "left-open.db" in out
    assert "ERROR test_cases.py::test_running_thread_is_reported" in out
    assert "leaked 1 running thread(s): left-running" in out
    assert "6 passed, 2 errors" in out, out
