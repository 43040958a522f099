"""Read commands create nothing, and the plain read commands run without typer.

- Every read command (search, list, show, stats, export, status, context, doctor, report)
  against a database path that does not exist and against an LLMEM_HOME that does not
  exist: one ``error:`` line and exit 1 (a missing session's context file stays exit 2),
  and not one file or folder created (issue 18, item 10).
- `llmem_hooks.cli.quick` answers plain ``search`` / ``list`` / ``stats`` / ``--version``
  without typer; each form here runs both ways (the entry point, and typer's
  `llmem_hooks.cli.app.main`) and must print the same bytes with the same exit code.
- A keyword search builds no HTTP client and asks no model when the store holds no vector
  or the back-off file says the model is down (a real listener on loopback counts the
  connections).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmem_hooks.cli import app as typer_app
from llmem_hooks.cli import main, quick
from llmem_hooks.store import MemoryStore

CLI = [sys.executable, "-m", "llmem_hooks.cli"]


def tree(root: Path) -> set[str]:
    """Every path under ``root`` (and root itself if it exists)."""
    if not root.exists():
        return set()
    return {str(root)} | {str(p) for p in root.rglob("*")}


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=env or os.environ.copy(),
    )


READS: list[list[str]] = [
    ["stats"],
    ["stats", "--embeddings"],
    ["--json", "stats"],
    ["search", "docker"],
    ["search", "--mode", "fts", "docker"],
    ["search", "docker", "--json", "--limit", "3"],
    ["search", "docker", "--help-me"],  # not a plain form: typer answers (usage error)
    ["list"],
    ["list", "--limit", "20", "--json"],
    ["show", "abcdef"],
    ["export", "-"],
    ["status"],
    ["dream"],  # a dry run only reads
    ["dream", "--runs"],
]


@pytest.mark.parametrize("args", READS, ids=lambda a: " ".join(a))
def test_read_commands_on_a_missing_db_create_nothing(
    args: list[str], tmp_path: Path, llmem_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nonexistent" / "dir" / "x.db"
    before = tree(tmp_path)
    code = main(["--db", str(missing), *args])
    out, err = capsys.readouterr()
    if "--help-me" in args:
        assert code == 2 and "No such option" in err
    else:
        assert (code, out, err) == (1, "", f"error: no database at {missing}\n")
    assert tree(tmp_path) == before
    assert not llmem_home.exists()


@pytest.mark.parametrize("args", [a for a in READS if "--help-me" not in a], ids=" ".join)
def test_read_commands_without_llmem_home_create_nothing(
    args: list[str], tmp_path: Path, llmem_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = tree(tmp_path)
    code = main(args)
    out, err = capsys.readouterr()
    assert (code, out, err) == (1, "", f"error: no database at {llmem_home / 'memory.db'}\n")
    assert tree(tmp_path) == before and not llmem_home.exists()


def test_other_reads_create_nothing(
    tmp_path: Path, llmem_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`export FILE`, `report --html`, `context` and `doctor`: no database, no home, no
    output file; `doctor` still diagnoses (it says no database was opened)."""
    before = tree(tmp_path)
    assert main(["export", str(tmp_path / "out.json")]) == 1
    assert main(["report", "--html", str(tmp_path / "r.html")]) == 1
    assert main(["context", "s1"]) == 2  # no context file: as before, a usage-class error
    capsys.readouterr()
    code = main(["doctor", "--json"])
    out, _ = capsys.readouterr()
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    assert checks["vectors"]["status"] == "skip"
    assert code in (0, 1)
    assert tree(tmp_path) == before and not llmem_home.exists()


def test_real_entry_point_on_a_missing_folder(tmp_path: Path, llmem_home: Path) -> None:
    """The issue's reproduction, as a subprocess: exit 1, one line, no folder."""
    missing = tmp_path / "nonexistent" / "dir" / "x.db"
    for args in (["stats"], ["search", "x"], ["list"], ["status"], ["show", "abc"]):
        r = run_cli("--db", str(missing), *args)
        assert (r.returncode, r.stdout, r.stderr) == (1, "", f"error: no database at {missing}\n")
    assert not missing.parent.parent.exists() and not llmem_home.exists()


def test_writing_commands_still_create_the_home(llmem_home: Path) -> None:
    r = run_cli("store", "the api listens on port 8080")
    assert r.returncode == 0, r.stderr
    assert (llmem_home / "memory.db").exists() and (llmem_home / "config.yaml").exists()
    r = run_cli("search", "api port")
    assert r.returncode == 0 and "port 8080" in r.stdout


# -- the same answer with and without typer ------------------------------------------------
@pytest.fixture
def filled(llmem_home: Path) -> Path:
    db = llmem_home / "memory.db"
    with MemoryStore(db) as st:
        for i in range(30):
            st.add(
                "decision" if i % 3 else "fact",
                f"memory {i}: we deploy the api with docker compose on port {8000 + i}"
                + (" \x1b[31mred\x1b[0m" if i == 7 else ""),
                tags=["infra", f"t{i % 4}"],
                project="/work/p1" if i % 2 else None,
            )
        st.add("fact", "a much longer note about redis\n" + "filler line\n" * 80 + "redis port")
    return db


SAME: list[list[str]] = [
    ["--version"],
    ["search", "docker"],
    ["search", "docker compose", "--json"],
    ["search", "docker", "--markdown", "-n", "3", "--offset", "2"],
    ["search", "--limit=5", "api", "--no-fuzzy", "--mode", "fts"],
    ["search", "dokcer", "--fuzzy", "--threshold", "0.6"],
    ["search", "redis"],
    ["search", "redis", "--full"],
    ["search", "docker", "--tags", "t1", "--project", "/work/p1", "-t", "decision"],
    ["search", "docker", "--any-tag", "t1,t2", "--after", "2000-01-01", "--before", "2999-01-01"],
    ["search", "docker", "--entered-by", "user"],
    ["search", "nothing-matches-this"],
    ["search", "docker", "--mode", "bogus"],
    ["search", "docker", "--json", "--markdown"],
    ["--json", "search", "docker"],
    ["--markdown", "search", "docker", "--json"],
    ["list"],
    ["list", "--limit", "20"],
    ["list", "--sort", "content", "--order", "asc", "--json"],
    ["list", "--all", "--tags", "infra,t2", "--type", "fact", "--project", "/work/p1"],
    ["list", "--entered-by", "nobody"],
    ["stats"],
    ["stats", "--json"],
    ["--markdown", "stats"],
    ["stats", "--embeddings"],
    # Not plain forms: the fast path hands them to typer, which answers for both.
    ["search"],
    ["search", "a", "b"],
    ["search", "x", "--limit", "0"],
    ["search", "x", "--limit", "abc"],
    ["search", "x", "--bogus"],
    ["list", "--sort", "bogus"],
    ["list", "-n5"],
    ["stats", "--help"],
    ["--json", "--markdown", "stats"],
]


@pytest.mark.parametrize("args", SAME, ids=" ".join)
def test_fast_path_prints_what_typer_prints(
    args: list[str], filled: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    fast = (main(args), *capsys.readouterr())
    slow = (typer_app.main(args), *capsys.readouterr())
    assert fast == slow


PLAIN = [a for a in SAME[:25] if a != ["--version"]]


@pytest.mark.parametrize("args", PLAIN, ids=" ".join)
def test_plain_forms_take_the_fast_path(
    args: list[str], filled: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert quick.main(args) is not None


@pytest.mark.parametrize("args", SAME[25:], ids=" ".join)
def test_other_forms_go_to_typer(args: list[str], filled: Path) -> None:
    assert quick.main(args) is None


def test_db_as_a_folder_goes_to_typer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert quick.main(["--db", str(tmp_path), "stats"]) is None
    assert main(["--db", str(tmp_path), "stats"]) == 2
    assert "is a directory" in capsys.readouterr().err


# -- a keyword search asks no model ----------------------------------------------------------
class CountingServer:
    """A loopback listener that counts connections (and never answers)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        deadline = time.monotonic() + 60
        while not self.stop.is_set() and time.monotonic() < deadline:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.close()


@pytest.fixture
def server() -> Iterator[CountingServer]:
    s = CountingServer()
    yield s
    s.close()


PROBE = (
    "import sys\n"
    "from llmem_hooks.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "print('MODULES', 'typer' in sys.modules, 'httpx' in sys.modules, code, file=sys.stderr)\n"
)


def probe(*args: str) -> tuple[str, str]:
    r = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=60
    )
    last = r.stderr.strip().splitlines()[-1]
    return r.stdout, last


def test_keyword_search_on_a_store_without_vectors_asks_no_model(
    llmem_home: Path, server: CountingServer
) -> None:
    llmem_home.mkdir()
    (llmem_home / "config.yaml").write_text(f"ollama:\n  enabled: true\n  base_url: {server.url}\n")
    with MemoryStore(llmem_home / "memory.db") as st:
        st.add("fact", "the api listens on port 8080")
    out, modules = probe("search", "api port")
    assert "port 8080" in out
    assert modules == "MODULES False False 0"  # no typer, no HTTP stack
    for args in (["list"], ["stats"], ["--version"]):
        assert probe(*args)[1] == "MODULES False False 0"
    assert server.connections == 0


def test_search_with_the_model_backed_off_asks_no_model(
    llmem_home: Path, server: CountingServer
) -> None:
    llmem_home.mkdir()
    (llmem_home / "config.yaml").write_text(f"ollama:\n  enabled: true\n  base_url: {server.url}\n")
    with MemoryStore(llmem_home / "memory.db", vec_dimensions=768) as st:
        st.add("fact", "the api listens on port 8080", embedding=[1.0] + [0.0] * 767)
    from llmem_hooks.model.backoff import SharedBackoff

    SharedBackoff(llmem_home / "model-backoff.json").failed(server.url, "down", "test", 2.0)
    out, modules = probe("search", "api port")
    assert "port 8080" in out
    assert modules == "MODULES False False 0"
    assert server.connections == 0


def test_a_dangling_symlink_is_a_missing_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    link = tmp_path / "x.db"
    link.symlink_to(tmp_path / "gone" / "target.db")
    before = tree(tmp_path)
    assert main(["--db", str(link), "list"]) == 1
    assert capsys.readouterr().err == f"error: no database at {link}\n"
    assert tree(tmp_path) == before
