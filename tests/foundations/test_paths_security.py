"""Issue 9, defects 3, 9 and 12: which paths we chmod, symlinks, temp files, read-only use.

Real files, real SQLite and real `llmem-hooks` processes. "System" folders are emulated
with a tmp folder added to `SYSTEM_DIRS` (in-process) or checked as strings: nothing
here runs against /etc, /usr or any other real system folder.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import signal
import stat
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmem_hooks import paths
from llmem_hooks.cli import app as cli_app
from llmem_hooks.config import validate_config
from llmem_hooks.errors import ConfigError, ValidationError
from llmem_hooks.session.context import remove_session_files, write_context_file
from llmem_hooks.sidecar import loop as sidecar
from llmem_hooks.store import MemoryStore, SchemaBehind
from llmem_hooks.store.db import connect
from llmem_hooks.store.migrations import migrate

EXE = Path(sys.executable).parent / "llmem-hooks"
SID = "55634ac8-b1c4-44ad-a4cf-4c99a1b09a4c"


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def _snapshot(folder: Path) -> dict[str, tuple[str, int, int]]:
    """name -> (sha256, mode, mtime_ns) of every file in ``folder``."""
    out = {}
    for p in sorted(folder.iterdir()):
        st = p.lstat()
        digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else ""
        out[p.name] = (digest, stat.S_IMODE(st.st_mode), st.st_mtime_ns)
    return out


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LLMEM_DB",)}
    env["LLMEM_HOME"] = str(home)
    env.update(extra)
    return env


def cli(home: Path, *args: str | Path, cwd: Path | None = None, **kw: object):
    return subprocess.run(
        [str(EXE), *map(str, args)],
        capture_output=True,
        text=True,
        env=_env(home),
        cwd=cwd,
        timeout=60,
        check=False,
        **kw,  # type: ignore[arg-type]
    )


def _config(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(
        text + "copilot:\n  autostart_sidecar: false\nollama:\n  enabled: false\n",
        encoding="utf-8",
    )


# -- defect 3: folders the user chose keep their mode -------------------------------------------
def test_export_into_an_existing_folder_keeps_its_mode(llmem_home: Path, tmp_path: Path) -> None:
    _config(llmem_home, "")
    assert cli(llmem_home, "store", "exports stay where asked").returncode == 0
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o755)
    r = cli(llmem_home, "export", shared / "mem.json")
    assert r.returncode == 0, r.stderr
    assert _mode(shared) == 0o755
    assert _mode(shared / "mem.json") == 0o600
    assert json.loads((shared / "mem.json").read_text(encoding="utf-8"))


def test_db_flag_and_config_paths_leave_existing_folders_alone(
    llmem_home: Path, tmp_path: Path
) -> None:
    dbdir, ctxdir = tmp_path / "dbs", tmp_path / "ctx"
    for d in (dbdir, ctxdir):
        d.mkdir()
        os.chmod(d, 0o755)
    r = cli(llmem_home, "--db", dbdir / "x.db", "store", "chosen folder")
    assert r.returncode == 0, r.stderr
    assert _mode(dbdir) == 0o755
    _config(llmem_home, f"memory:\n  db_path: {dbdir / 'y.db'}\ncontext:\n  dir: {ctxdir}\n")
    assert cli(llmem_home, "store", "configured folder").returncode == 0
    assert cli(llmem_home, "stats").returncode == 0
    hook = subprocess.run(
        [str(EXE), "hook", "copilot", "sessionStart"],
        input=json.dumps({"sessionId": SID, "cwd": str(tmp_path), "source": "new"}),
        capture_output=True,
        text=True,
        env=_env(llmem_home),
        timeout=60,
        check=False,
    )
    assert hook.returncode == 0
    assert (ctxdir / f"{SID}.md").exists()  # written there...
    assert _mode(dbdir) == 0o755 and _mode(ctxdir) == 0o755  # ...and nothing chmodded
    assert _mode(llmem_home) == 0o700  # our own home is private


def test_a_shared_folder_as_llmem_home_is_not_chmodded(tmp_path: Path) -> None:
    """LLMEM_HOME pointed at a shared folder (sticky, world-writable, like /tmp): our
    files go in private, the folder keeps its mode."""
    shared = tmp_path / "shared-tmp"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    _config(shared, "")
    assert cli(shared, "store", "in a shared home").returncode == 0
    assert _mode(shared) == 0o1777
    assert _mode(shared / "memory.db") == 0o600


def test_relative_config_paths_resolve_against_llmem_home(llmem_home: Path, tmp_path: Path) -> None:
    _config(llmem_home, "memory:\n  db_path: data/mem.db\ncontext:\n  dir: ctx\n")
    elsewhere = tmp_path / "some-repo"
    elsewhere.mkdir()
    assert cli(llmem_home, "store", "relative paths", cwd=elsewhere).returncode == 0
    assert (llmem_home / "data" / "mem.db").is_file()
    assert list(elsewhere.iterdir()) == []
    assert paths.get_context_dir("ctx") == llmem_home / "ctx"


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        ("memory", "db_path", "/etc/shadow"),
        ("memory", "db_path", "/usr/lib/x.db"),
        ("memory", "db_path", "/proc/self/mem"),
        ("memory", "db_path", "/x.db"),
        ("context", "dir", "/etc"),
        ("context", "dir", "/var/lib/llmem"),
        ("context", "dir", "/"),
    ],
)
def test_system_locations_are_refused_by_validation(section: str, key: str, value: str) -> None:
    """String checks only: validation refuses before anything touches the file system."""
    with pytest.raises(ConfigError, match=f"{section}.{key}.*system folder"):
        validate_config({section: {key: value}})


def test_temp_folders_are_not_system_locations(tmp_path: Path) -> None:
    for ok in (str(tmp_path / "m.db"), "/var/folders/xy/T/m.db", "/run/user/1000/llmem/m.db"):
        assert not paths.is_system_path(ok), ok


def test_a_system_db_path_fails_before_any_chmod(
    llmem_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """The /etc/shadow case, emulated: a tmp folder plays /etc (also reached through a
    symlink, which is resolved before the prefix check)."""
    fake_etc = tmp_path / "fake-etc"
    fake_etc.mkdir()
    os.chmod(fake_etc, 0o755)
    (fake_etc / "shadow").write_bytes(b"root:*:19000:0:99999:7:::\n")
    os.chmod(fake_etc / "shadow", 0o640)
    (tmp_path / "innocent").symlink_to(fake_etc)
    monkeypatch.setattr(paths, "SYSTEM_DIRS", (str(fake_etc),))
    before = _snapshot(fake_etc)
    for db in (fake_etc / "shadow", tmp_path / "innocent" / "shadow", fake_etc / "new.db"):
        _config(llmem_home, f"memory:\n  db_path: {db}\n")
        assert cli_app.main(["stats"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "system folder" in err, err
        assert cli_app.main(["--db", str(db), "list"]) == 2
        assert "system folder" in capsys.readouterr().err
    assert _mode(fake_etc) == 0o755
    assert _snapshot(fake_etc) == before


def test_paths_of_the_wrong_kind_are_refused(llmem_home: Path, tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("x", encoding="utf-8")
    with pytest.raises(ConfigError, match="not a directory"):
        validate_config({"context": {"dir": str(a_file)}})
    with pytest.raises(ConfigError, match="not a regular file"):
        validate_config({"memory": {"db_path": str(tmp_path)}})
    with pytest.raises(ValidationError, match="system folder"):
        paths.check_user_path("/etc/shadow", "file", "memory.db_path")


def test_a_non_sqlite_db_fails_in_one_line_and_changes_nothing(
    llmem_home: Path, tmp_path: Path
) -> None:
    _config(llmem_home, "")
    folder = tmp_path / "notes"
    folder.mkdir()
    os.chmod(folder, 0o755)
    notes = folder / "notes.txt"
    notes.write_bytes(b"my precious notes, not a database\n" * 50)
    os.chmod(notes, 0o640)
    before = _snapshot(folder)
    for command in (["stats"], ["list"], ["store", "x"], ["search", "x"]):
        r = cli(llmem_home, "--db", notes, *command)
        assert r.returncode == 2, (command, r.stderr)
        assert r.stderr.count("\n") == 1 and "not an SQLite database" in r.stderr
        assert "Traceback" not in r.stderr
    assert _snapshot(folder) == before  # same bytes, mode, mtime; no -wal/-shm/-journal
    assert _mode(folder) == 0o755


# -- defect 9: log rotation, symlinks, temp files, relative LLMEM_HOME -----------------------------
def test_sidecar_log_is_0600_after_rotation_even_with_umask_000(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, permissive_umask: None
) -> None:
    monkeypatch.setattr(sidecar, "LOG_BYTES", 300)
    path = sidecar.setup_logging(tmp_path / "home", stream=None)
    log = logging.getLogger("llmem_hooks.test")
    try:
        for i in range(40):
            log.info("line %d of the rotation test %s", i, "x" * 40)
    finally:
        root = logging.getLogger("llmem_hooks")
        for h in list(root.handlers):
            if getattr(h, "_llmem_sidecar", False):
                root.removeHandler(h)
                h.close()
        root.propagate = True
    logs = sorted(path.parent.iterdir())
    assert len(logs) >= 3  # sidecar.log, .1, .2...
    assert {p.name: _mode(p) for p in logs} == {p.name: 0o600 for p in logs}


def test_context_files_are_not_written_through_a_symlinked_folder(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    os.chmod(target, 0o755)
    link = tmp_path / "context"
    link.symlink_to(target)
    assert write_context_file(link / f"{SID}.md", "memories") is False
    assert list(target.iterdir()) == [] and _mode(target) == 0o755
    real = tmp_path / "real-context"
    real.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me", encoding="utf-8")
    (real / f"{SID}.md").symlink_to(victim)
    assert write_context_file(real / f"{SID}.md", "memories") is False
    assert victim.read_text(encoding="utf-8") == "keep me"


def test_retention_cleanup_does_not_delete_through_a_symlinked_folder(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / f"{SID}.md").write_text("not ours", encoding="utf-8")
    link = tmp_path / "context"
    link.symlink_to(target)
    assert remove_session_files(SID, link) == []
    assert (target / f"{SID}.md").read_text(encoding="utf-8") == "not ours"
    own = tmp_path / "own"
    own.mkdir()
    (own / f"{SID}.md").write_text("ours", encoding="utf-8")
    assert remove_session_files(SID, own) == [own / f"{SID}.md"]


def test_retention_cleanup_removes_every_file_of_the_session(tmp_path: Path) -> None:
    """The context file, the resume pack, and the Copilot hook's marker and recall lock go
    with the session; another session's files stay."""
    own = tmp_path / "own"
    own.mkdir()
    names = [f"{SID}{s}" for s in (".md", ".compact.md", ".compact.injected", ".recall.lock")]
    for name in [*names, "other.md", "other.recall.lock"]:
        (own / name).write_text("x", encoding="utf-8")
    assert sorted(p.name for p in remove_session_files(SID, own)) == sorted(names)
    assert sorted(p.name for p in own.iterdir()) == ["other.md", "other.recall.lock"]


def test_hook_neither_writes_through_nor_prints_symlinks(llmem_home: Path, tmp_path: Path) -> None:
    """Real hook processes: a symlinked context/ is not written through (nor chmodded),
    and a <session>.md that is a symlink is not printed by sessionStart."""
    _config(llmem_home, "")
    assert cli(llmem_home, "store", "a memory for the new session").returncode == 0
    target = tmp_path / "target"
    target.mkdir()
    os.chmod(target, 0o755)
    (llmem_home / "context").symlink_to(target)

    def start(sid: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(EXE), "hook", "copilot", "sessionStart"],
            input=json.dumps({"sessionId": sid, "cwd": str(tmp_path), "source": "new"}),
            capture_output=True,
            text=True,
            env=_env(llmem_home),
            timeout=60,
            check=False,
        )

    assert start(SID).returncode == 0
    assert list(target.iterdir()) == [] and _mode(target) == 0o755
    (llmem_home / "context").unlink()
    (llmem_home / "context").mkdir()
    secret = tmp_path / "id_rsa"
    secret.write_text("-----BEGIN SECRET KEY----- do not print\n", encoding="utf-8")
    (llmem_home / "context" / f"{SID}.md").symlink_to(secret)
    r = start(SID)
    assert r.returncode == 0
    assert "do not print" not in r.stdout


def test_atomic_writes_use_random_exclusive_temp_files(
    tmp_path: Path, permissive_umask: None
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me", encoding="utf-8")
    target = tmp_path / "out" / "file.json"
    target.parent.mkdir()
    # The name the old code used: a planted symlink there was written through.
    (target.parent / f".{target.name}.{os.getpid()}.tmp").symlink_to(victim)
    paths.write_private_file(target, "new content")
    assert victim.read_text(encoding="utf-8") == "keep me"
    assert target.read_text(encoding="utf-8") == "new content" and _mode(target) == 0o600
    names = set()
    for _ in range(20):
        fd, tmp = paths.open_private_temp(target.parent, target.name)
        os.close(fd)
        assert _mode(tmp) == 0o600
        names.add(tmp.name)
        tmp.unlink()
    assert len(names) == 20


def test_relative_llmem_home_is_made_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LLMEM_HOME", "rel-home")
    assert paths.get_llmem_home() == tmp_path / "rel-home"
    assert os.environ["LLMEM_HOME"] == str(tmp_path / "rel-home")  # what children inherit


def test_hook_with_relative_llmem_home_starts_one_sidecar_in_the_right_home(
    tmp_path: Path,
) -> None:
    """Real processes: the hook (relative LLMEM_HOME) starts the sidecar; the sidecar
    uses the same home (its pid file appears there, not in <home>/<home>), and a second
    hook call finds it running instead of starting another one."""
    work = tmp_path / "work"
    work.mkdir()
    home = work / "rel-home"
    _config(home, "")
    (home / "config.yaml").write_text(
        "copilot:\n  autostart_sidecar: true\nopencode:\n  enabled: false\n"
        "ollama:\n  enabled: false\n",
        encoding="utf-8",
    )
    env = _env(Path("rel-home"), COPILOT_HOME=str(tmp_path / "copilot-home"))
    payload = json.dumps({"sessionId": SID, "cwd": str(work), "source": "new"})
    pids: list[int] = []
    try:
        for _ in range(2):
            r = subprocess.run(
                [str(EXE), "hook", "copilot", "sessionStart"],
                input=payload,
                capture_output=True,
                text=True,
                env=env,
                cwd=work,
                timeout=60,
                check=False,
            )
            assert r.returncode == 0
            deadline = time.monotonic() + 20
            while not (home / "sidecar.pid").exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            assert (home / "sidecar.pid").exists()
            pids.append(int((home / "sidecar.pid").read_text().strip()))
        assert pids[0] == pids[1]
        assert not (home / "rel-home").exists()
    finally:
        # Also a sidecar that went to <home>/<home> (the defect): stop what we started.
        nested = home / "rel-home" / "sidecar.pid"
        if nested.exists():
            pids.append(int(nested.read_text().strip()))
        for pid in set(pids):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while (home / "sidecar.pid").exists() and time.monotonic() < deadline:
            time.sleep(0.1)


# -- defect 12: read-only use -------------------------------------------------------------
READ_COMMANDS = (
    ["list"],
    ["search", "readonly"],
    ["stats"],
    ["status"],
    ["export", "-"],
)


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A tmp folder other users can traverse (pytest's tmp_path is 0700 under root)."""
    folder = Path(tempfile.mkdtemp(prefix="llmem-ro-"))
    os.chmod(folder, 0o755)
    try:
        yield folder
    finally:
        for p in folder.rglob("*"):
            if p.is_dir() and not p.is_symlink():
                os.chmod(p, 0o755)
        shutil.rmtree(folder)


def _readonly_db(folder: Path, home: Path) -> Path:
    _config(home, "")
    dbdir = folder / "ro"
    dbdir.mkdir()
    db = dbdir / "memory.db"
    r = cli(home, "--db", db, "store", "readonly users can read this", "--tags", "ro")
    assert r.returncode == 0, r.stderr
    os.chmod(db, 0o444)
    os.chmod(dbdir, 0o555)
    return db


def test_read_commands_change_nothing_in_the_database_folder(
    llmem_home: Path, shared_tmp: Path
) -> None:
    db = _readonly_db(shared_tmp, llmem_home)
    before = _snapshot(db.parent)
    mem_id = json.loads(cli(llmem_home, "--db", db, "list", "--json").stdout)[0]["id"]
    for command in (*READ_COMMANDS, ["show", mem_id]):
        r = cli(llmem_home, "--db", db, *command)
        assert r.returncode == 0, (command, r.stderr)
        assert "readonly database" not in r.stderr
        assert _snapshot(db.parent) == before, command  # bytes, mtime; no -wal/-shm
    assert (
        "readonly users can read this" in cli(llmem_home, "--db", db, "search", "readonly").stdout
    )


def _nobody_command() -> list[str] | None:
    """As root, a command line that runs llmem-hooks as 'nobody': this venv's script, or,
    when its Python lives where 'nobody' cannot go (a pyenv Python under /root), the
    system Python of the same minor version with this venv's site-packages added."""
    if os.geteuid() != 0:
        return None
    site_dir = sysconfig.get_paths()["purelib"]
    boot = (
        f"import site, sys; site.addsitedir({site_dir!r}); "
        "sys.argv[0] = 'llmem-hooks'; from llmem_hooks.cli import main; main()"
    )
    candidates = [[str(EXE)]]
    for name in (f"python{sys.version_info.major}.{sys.version_info.minor}", "python3"):
        found = shutil.which(name, path="/usr/local/bin:/usr/bin:/bin")
        if found:
            candidates.append([found, "-c", boot])
    for command in candidates:
        try:
            r = subprocess.run(
                [*command, "--help"], capture_output=True, timeout=60, user=65534, group=65534
            )
        except OSError:
            continue
        if r.returncode == 0:
            return command
    return None


NOBODY = _nobody_command()


@pytest.mark.skipif(NOBODY is None, reason="needs root and a Python 'nobody' can run")
def test_read_commands_work_for_a_user_who_cannot_write(shared_tmp: Path) -> None:
    """As root, run the CLI as 'nobody': permission bits then really stop writes."""
    home = shared_tmp / "home"
    db = _readonly_db(shared_tmp, home)
    os.chown(db, 65534, 65534)
    user_home = shared_tmp / "nobody-home"
    user_home.mkdir()
    shutil.copy(home / "config.yaml", user_home / "config.yaml")
    for p in (user_home, user_home / "config.yaml"):
        os.chown(p, 65534, 65534)
    before = _snapshot(db.parent)
    for command in READ_COMMANDS:
        r = subprocess.run(
            [*(NOBODY or []), "--db", str(db), *command],
            capture_output=True,
            text=True,
            env={**_env(user_home), "HOME": str(user_home)},
            timeout=60,
            check=False,
            user=65534,
            group=65534,
            extra_groups=[],
        )
        assert r.returncode == 0, (command, r.stderr)
        assert "readonly database" not in r.stderr
    assert _snapshot(db.parent) == before


def _old_db(folder: Path) -> Path:
    folder.mkdir()
    db = folder / "old.db"
    conn = connect(db)
    migrate(conn, upto=5)
    conn.close()
    return db


def test_an_older_schema_opened_read_only_says_so_in_one_line(tmp_path: Path) -> None:
    db = _old_db(tmp_path / "old")
    before = _snapshot(db.parent)
    with pytest.raises(SchemaBehind, match=r"lacks \d+ schema upgrade"):
        MemoryStore(db, read_only=True)
    assert _snapshot(db.parent) == before


def test_a_read_command_upgrades_an_older_schema_it_may_write(
    llmem_home: Path, tmp_path: Path
) -> None:
    """First use after an upgrade: `list` on a writable older database migrates it (one
    note on stderr) instead of refusing."""
    _config(llmem_home, "")
    db = _old_db(tmp_path / "old")
    r = cli(llmem_home, "--db", db, "list")
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("upgrading the schema") == 1
    with MemoryStore(db, read_only=True) as st:  # now current
        assert st.count() == 0
