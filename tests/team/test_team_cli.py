"""The team commands as a person meets them: bad input, wrong passwords, files on disk,
share / unshare, ``doctor``, the viewer's mark and the agents' ``memory_remember share``."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from machines import Machine, join_line, make_origin
from support.pg import HubDb, owner_role

from llmem_hooks.store import MemoryStore


@pytest.fixture
def lead(tmp_path: Path, hub_db: HubDb) -> tuple[Machine, str, str]:
    role, password = owner_role(hub_db)
    machine = Machine("lead", tmp_path / "lead", make_origin(tmp_path))
    machine.cli("team", "init", hub_db.dsn(role, password))
    return machine, role, password


@pytest.mark.parametrize(
    "dsn",
    ["", "not a dsn at all ===", "postgresql://", "x" * 5000, "host=/nowhere port=notaport"],
)
def test_a_bad_connection_string_is_one_line_and_keeps_nothing(tmp_path: Path, dsn: str) -> None:
    m = Machine("m", tmp_path / "m", make_origin(tmp_path))
    out = m.cli("team", "join", dsn, check=False)
    assert out.returncode in (1, 2) and out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith("error: ")
    assert not (m.llmem_home / "team" / "hub.json").exists()


def test_a_wrong_password_is_refused_without_echoing_it(
    lead: tuple[Machine, str, str], hub_db: HubDb, tmp_path: Path
) -> None:
    m = Machine("m", tmp_path / "m", lead[0].origin)
    wrong = "Wr0ng-Secret-Value-123"
    out = m.cli("team", "join", hub_db.dsn(lead[1], wrong), check=False)
    assert out.returncode == 1 and out.stderr.count("\n") == 1, out.stderr
    assert wrong not in out.stderr + out.stdout
    assert not (m.llmem_home / "team").exists() or not any((m.llmem_home / "team").iterdir())


def test_the_password_lives_in_a_private_file_never_in_config_or_logs(
    lead: tuple[Machine, str, str],
) -> None:
    m, _role, password = lead
    folder = m.llmem_home / "team"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for name in ("hub.json", "pgpass"):
        assert stat.S_IMODE((folder / name).stat().st_mode) == 0o600
    assert password not in (folder / "hub.json").read_text()
    assert password in (folder / "pgpass").read_text()
    for path in m.llmem_home.rglob("*"):
        if path.is_file() and path.name != "pgpass" and path.suffix not in (".db", ".db-wal"):
            assert password not in path.read_text(errors="replace"), path
    status = m.cli("team", "status").stdout
    assert "reachable" in status and password not in status


def test_share_and_unshare_by_hand(lead: tuple[Machine, str, str], hub_db: HubDb) -> None:
    m = lead[0]
    mid = m.store("I prefer tabs in the widgets repo.", "preference")  # personal by policy
    assert m.sync()["pushed"] == 0
    assert "shared" in m.cli("share", mid[:12]).stdout
    assert m.sync()["pushed"] == 1
    with hub_db.cluster.admin(db=hub_db.name) as conn:
        (live,) = conn.execute("SELECT deleted_at FROM llmem.memories").fetchall()
        assert live[0] is None
    m.cli("unshare", mid)
    m.sync()
    with hub_db.cluster.admin(db=hub_db.name) as conn:
        (gone,) = conn.execute("SELECT deleted_at, content FROM llmem.memories").fetchall()
        assert gone[0] is not None and "tabs" not in gone[1]
    assert [x for x in m.memories() if x["id"] == mid]  # it stays here
    global_id = m.cli("store", "Always answer in English.", "--json").stdout
    refused = m.cli("share", json.loads(global_id)["id"], check=False)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr


def test_doctor_and_the_viewer_show_the_team(lead: tuple[Machine, str, str]) -> None:
    m = lead[0]
    mid = m.store("Code review needs two approvals.")
    checks = {
        c["name"]: c for c in json.loads(m.cli("doctor", "--json", check=False).stdout)["checks"]
    }
    assert checks["team"]["status"] == "ok" and "1 changes to push" in checks["team"]["detail"]
    m.sync()
    checks = {
        c["name"]: c for c in json.loads(m.cli("doctor", "--json", check=False).stdout)["checks"]
    }
    assert "0 changes to push" in checks["team"]["detail"]

    from llmem_hooks.viewer.data import ViewerData

    with MemoryStore(m.db()) as store:
        data = ViewerData(store, home=m.llmem_home)
        overview = data.overview()
        (card,) = [c for c in overview["memories"] if c["id"] == mid]
        assert card["shared"] is True
        assert overview["team"]["projects"] == 1 and overview["team"]["outbox"] == 0


def test_doctor_says_an_unreachable_hub_in_one_line(
    lead: tuple[Machine, str, str], hub_db: HubDb
) -> None:
    m, _role, password = lead
    hub_db.cluster.stop()
    try:
        out = m.cli("doctor", "--json", check=False)
    finally:
        hub_db.cluster.start()
    checks = {c["name"]: c for c in json.loads(out.stdout)["checks"]}
    assert checks["team"]["status"] == "warn" and "not reachable" in checks["team"]["detail"]
    assert password not in out.stdout + out.stderr


def test_memory_remember_with_share_goes_to_the_team(
    lead: tuple[Machine, str, str], hub_db: HubDb
) -> None:
    """The agents' tool through the official MCP client and `llmem-hooks mcp`: a
    preference (personal by policy) shared because the agent asked."""
    from support.mcp_client import run_calls

    m = lead[0]
    text = "I like the blue theme in the admin UI."
    _tools, results = run_calls(
        [("memory_remember", {"content": text, "type": "preference", "share": True})],
        m.repo,
        env=m.env,
    )
    ((failed, said),) = results
    assert not failed and "Shared with the team." in said, said
    assert m.sync()["pushed"] == 1
    with hub_db.cluster.admin(db=hub_db.name) as conn:
        assert conn.execute("SELECT content FROM llmem.memories").fetchone()[0] == text


def test_two_syncs_at_once_apply_and_send_nothing_twice(
    lead: tuple[Machine, str, str], hub_db: HubDb, tmp_path: Path
) -> None:
    a = lead[0]
    added = a.cli("team", "members", "add", f"dev_{hub_db.name}", "--create").stdout
    hub_db.roles.append(f"dev_{hub_db.name}")
    b = Machine("b", tmp_path / "b", a.origin)
    b.cli("team", "join", join_line(added))
    store = MemoryStore(a.db())
    try:
        for i in range(300):
            store.add("fact", f"Queue q{i} drains into topic t{i}.", project=a.project())
    finally:
        store.close()
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "llmem_hooks.cli", "team", "sync"],
            cwd=m.repo,
            env=m.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for m in (a, a, b, b)
    ]
    for p in procs:
        p.wait(120)
    a.sync()
    b.sync()
    b.sync()
    with hub_db.cluster.admin(db=hub_db.name) as conn:
        assert conn.execute("SELECT count(*) FROM llmem.memories").fetchone()[0] == 300
    held = [x for x in b.memories() if x["content"].startswith("Queue q")]
    assert len(held) == 300 and len({x["content"] for x in held}) == 300


def test_init_run_again_changes_nothing(lead: tuple[Machine, str, str], hub_db: HubDb) -> None:
    m, role, password = lead
    again = m.cli("team", "init", hub_db.dsn(role, password))
    assert "schema migrations applied: 0" in again.stdout, again.stdout
    assert m.json("team", "status")["reachable"] is True
    outside = m.cli("team", "init", hub_db.dsn(role, password), "--project", "/etc", check=False)
    assert outside.returncode != 0 and outside.stderr.count("\n") == 1, outside.stderr
