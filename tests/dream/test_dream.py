"""The dream cycle on a seeded real store (docs/dream.md): a dry run changes nothing;
--apply merges differently worded duplicates, decays unused memories, boosts used ones,
retires expired ones, keeps everything else, writes the diary and the report; --undo puts
every old value back; hooks run after their phase and their errors never stop it."""

from __future__ import annotations

import json
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from llmem_hooks import Dreamer, MemoryStore, register_dream_hook
from llmem_hooks.cli import main
from llmem_hooks.config import DEFAULT_CONFIG
from llmem_hooks.dream.likeness import similar_pairs, words
from llmem_hooks.registry import unregister_dream_hook

NOW = datetime.now(UTC)
P = "acme/api"


def ago(days: float) -> str:
    return (NOW - timedelta(days=days)).isoformat()


def mem(mid: str, content: str, days: float, **kw: Any) -> dict[str, Any]:
    return {"id": mid, "type": "fact", "content": content, "project": P,
            "created_at": ago(days), **kw}  # fmt: skip


SEED = [
    mem("dup-a", "The API stores its data in PostgreSQL 16.", 10, tags=["db"],
        confidence=0.7, source_message_ids=["m1"], session_id="s1"),
    mem("dup-b", "the api stores data in postgresql 16", 5, tags=["postgres"],
        confidence=0.9, source_message_ids=["m2"], session_id="s2"),
    mem("dup-c", "Our API stores the data in PostgreSQL 16 for now.", 4, confidence=0.5),
    mem("swapped", "The API stores its logs in PostgreSQL 16.", 4),
    mem("other-version", "The API stores its data in PostgreSQL 15.", 3),
    mem("negated", "The API does not store its data in PostgreSQL 16.", 3),
    mem("unused", "Deploys go through the staging cluster first.", 90, confidence=0.8),
    mem("used", "Run make lint before every push.", 90, type="procedure", confidence=0.6,
        access_count=5, accessed_at=ago(1)),
    mem("expired", "The demo token works until Friday.", 5, expires_at=ago(1)),
    mem("stale-proc", "To release, tag the commit and push the tag.", 200, type="procedure"),
    mem("fresh", "The team prefers tabs over spaces.", 0),
    mem("jenkins", "CI runs on Jenkins.", 30, confidence=0.8),
    mem("moved", "We moved from Jenkins to GitHub Actions.", 1, type="decision"),
    mem("moved-2", "We switched from Slack to Zulip last week.", 1, type="decision"),
    mem("old-episode", "user: how do I deploy?\nassistant: use make deploy", 400,
        type="conversation", source="episode", session_id="s0"),
    mem("new-episode", "user: what is the port?\nassistant: 8080", 2,
        type="conversation", source="episode", session_id="s3"),
]  # fmt: skip


def config(**dream: Any) -> dict[str, Any]:
    cfg = {k: dict(v) for k, v in DEFAULT_CONFIG.items()}
    cfg["dream"].update(dream)
    return cfg


def seed(store: MemoryStore) -> None:
    assert store.import_memories(SEED) == len(SEED)
    store.add_to_inbox("Remember: the staging DB is read-only on weekends.", attention_score=0.8)
    store.add_to_inbox("maybe something about lunch", attention_score=0.2)


def dump(store: MemoryStore) -> dict[str, Any]:
    """Everything a person could tell apart: memories by id (every column but the row
    number), their tags, relations, the inbox, the dream book."""
    conn = store.conn
    mems = {}
    for row in conn.execute("SELECT * FROM memories ORDER BY id"):
        d = dict(row)
        d.pop("seq")
        mems[d.pop("id")] = d
    tags = sorted(
        tuple(t)
        for t in conn.execute(
            "SELECT m.id, t.name FROM memory_tags mt JOIN memories m ON m.seq = mt.memory_seq"
            " JOIN tags t ON t.id = mt.tag_id"
        )
    )
    rels = sorted(
        tuple(r) for r in conn.execute("SELECT source_id, target_id, relation_type FROM relations")
    )
    inbox = sorted(tuple(r) for r in conn.execute("SELECT * FROM inbox"))
    book = {
        t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
        for t in ("dream_runs", "dream_changes", "dream_state")
    }
    fts = conn.execute("SELECT count(*) FROM memories_fts").fetchone()[0]
    return {"memories": mems, "tags": tags, "relations": rels,
            "inbox": inbox, "book": book, "fts": fts}  # fmt: skip


def test_dry_run_changes_nothing(store: MemoryStore, llmem_home: Path) -> None:
    seed(store)
    before = dump(store)
    run = Dreamer(store, config()).run(apply=False)
    assert dump(store) == before
    assert not (llmem_home / "dream-diary.md").exists()
    assert not (llmem_home / "dream-report.html").exists()
    assert not (llmem_home / "backups").exists()
    light, deep, _rem = run.results
    # ... while it says what it would do
    assert [m["id"] for m in light.merged] == ["dup-b"]
    assert [m["id"] for m in light.retired] == ["expired"]
    assert light.pruned == [{"reason": "retention", "count": 1}]
    # the plan is what --apply does: "jenkins" is superseded first, so it is not decayed
    assert {d["id"] for d in deep.decayed} >= {"unused", "stale-proc"}
    assert "jenkins" not in {d["id"] for d in deep.decayed}
    assert [b["id"] for b in deep.boosted] == ["used"]
    assert [s["id"] for s in deep.superseded] == ["jenkins"]


def test_apply_on_a_seeded_store(store: MemoryStore, llmem_home: Path) -> None:
    seed(store)
    run = Dreamer(store, config()).run(apply=True)
    get = store.get
    # differently worded duplicates merged: the best text kept, tags and provenance united
    keep, gone = get("dup-b"), get("dup-a")
    assert keep["valid_until"] is None and keep["confidence"] == 0.9
    assert set(keep["tags"]) == {"db", "postgres"}
    assert set(keep["source_message_ids"]) == {"m1", "m2"}
    assert sorted(keep["metadata"]["merged_from"]) == ["dup-a", "dup-c"]
    assert gone["valid_until"] and gone["invalidation_reason"] == "merged into dup-b"
    assert get("dup-c")["invalidation_reason"] == "merged into dup-b"
    # a word each side lacks ("data" / "logs") is another statement: linked, not merged
    assert get("swapped")["valid_until"] is None
    assert any(r["relation_type"] == "related_to" for r in store.get_relations("swapped"))
    # a different number or a negation is not a duplicate either
    assert get("other-version")["valid_until"] is None
    assert get("negated")["valid_until"] is None
    # unused decayed (x 0.9), used boosted (+0.05), expired retired
    assert get("unused")["confidence"] == pytest.approx(0.72)
    assert get("used")["confidence"] == pytest.approx(0.65)
    assert get("expired")["valid_until"] and "expired" in get("expired")["invalidation_reason"]
    # contradicted by a newer change statement: superseded and linked
    assert get("jenkins")["valid_until"] is not None
    assert {"source_id": "moved", "target_id": "jenkins"}.items() <= next(
        r for r in store.get_relations("jenkins") if r["relation_type"] == "supersedes"
    ).items()
    # stale procedure flagged; related ones linked
    assert "possibly_stale" in get("stale-proc")["metadata"]
    assert "possibly_stale" not in get("used")["metadata"]
    related = {(r["source_id"], r["target_id"]) for r in store.get_relations("other-version")}
    assert related, "the 15 and 16 statements are related, not merged"
    # the inbox consolidated; the old episode pruned after a backup, the new one kept
    assert store.inbox_count() == 0
    assert store.search("weekends")
    assert get("old-episode") is None and get("new-episode") is not None
    backups = list((llmem_home / "backups").iterdir())
    assert len(backups) == 1 and stat.S_IMODE(backups[0].stat().st_mode) == 0o600
    assert "old-episode" in backups[0].read_text()
    # everything else kept as it was
    fresh = get("fresh")
    assert fresh["valid_until"] is None and fresh["confidence"] == 0.8
    # diary and report written, private
    diary = (llmem_home / "dream-diary.md").read_text()
    assert (
        run.run_id in diary and 'PostgreSQL 16." (dup-a, words' in diary and "0.8 -> 0.72" in diary
    )
    report = (llmem_home / "dream-report.html").read_text()
    assert "<script" not in report and "http" not in report.split("<body>")[1]
    assert "dup-a" in report and "decayed" in report
    for f in ("dream-diary.md", "dream-report.html"):
        assert stat.S_IMODE((llmem_home / f).stat().st_mode) == 0o600
    # a second run right after has nothing left to merge, retire or decay
    again = Dreamer(store, config()).run(apply=True)
    light, deep, _ = again.results
    assert not light.merged and not light.retired and not deep.decayed
    # incremental: a duplicate imported later (with an old date) is still compared
    store.import_memories([mem("late", "the team prefers TABS over spaces!", 100)])
    third = Dreamer(store, config()).run(["light"], apply=True).results[0]
    assert [(g["id"], [o["id"] for o in g["merged"]]) for g in third.merged] == [
        ("late", ["fresh"])
    ] or [(g["id"], [o["id"] for o in g["merged"]]) for g in third.merged] == [("fresh", ["late"])]


def test_undo_restores_every_old_value(store: MemoryStore) -> None:
    seed(store)
    before = dump(store)
    dreamer = Dreamer(store, config())
    run = dreamer.run(apply=True)
    assert dump(store)["memories"] != before["memories"]
    counts = dreamer.undo(run.run_id)
    assert counts["decay"] >= 2 and counts["delete"] == 1 and counts["merge"] == 1
    assert counts["merged"] == 2
    after = dump(store)
    for key in ("memories", "tags", "relations", "inbox", "fts"):
        assert after[key] == before[key], key
    with pytest.raises(Exception, match="already undone"):
        dreamer.undo(run.run_id)


def test_hooks_run_after_their_phase_and_errors_do_not_stop_the_cycle(
    store: MemoryStore,
) -> None:
    seed(store)
    seen: list[tuple[str, bool, int]] = []

    def broken(dreamer: Any, result: Any, apply: bool) -> None:
        raise RuntimeError("hook bug")

    def record(dreamer: Any, result: Any, apply: bool) -> None:
        assert isinstance(dreamer, Dreamer)
        seen.append((result.phase, apply, len(result.decayed)))

    register_dream_hook("light", broken)
    register_dream_hook("deep", record)
    try:
        register_dream_hook("deep", record)  # the same hook again: it runs once
        with pytest.raises(ValueError, match="invalid dream phase"):
            register_dream_hook("nap", record)
        run = Dreamer(store, config()).run(apply=True)
    finally:
        unregister_dream_hook("light")
        unregister_dream_hook("deep")
    assert seen == [("deep", True, len(run.results[1].decayed))]
    assert any("hook bug" in e for e in run.results[0].errors)
    assert [r.phase for r in run.results] == ["light", "deep", "rem"]
    assert store.get("unused")["confidence"] < 0.8  # deep ran after light's hook failed


def test_decay_at_most_once_per_interval_and_due(store: MemoryStore) -> None:
    seed(store)
    d = Dreamer(store, config(interval_hours=24))
    assert d.due()
    d.run(apply=True)
    assert not d.due()
    conf = store.get("unused")["confidence"]
    later = Dreamer(store, config(), now=NOW + timedelta(days=2))
    assert later.due()
    res = later.run(["deep"], apply=True).results[0]
    assert not res.decayed and any("decay skipped" in n for n in res.notes)
    assert store.get("unused")["confidence"] == conf
    much_later = Dreamer(store, config(), now=NOW + timedelta(days=31))
    assert much_later.run(["deep"], apply=True).results[0].decayed


def test_size_cap_prunes_oldest_episodes_first_and_vacuums(
    tmp_path: Path, llmem_home: Path
) -> None:
    body = "word " * 1500
    eps = [
        mem(f"ep-{i:03d}", f"{body} {i}", 300 - i, type="conversation", source="episode")
        for i in range(200)
    ]
    with MemoryStore(tmp_path / "cap.db") as st:
        st.import_memories([*eps, mem("keep", "A fact that stays.", 400)])
        # Make it an old-style store (auto_vacuum NONE): the cap switches it once.
        st.conn.execute("PRAGMA auto_vacuum = NONE")
        st.conn.execute("VACUUM")
        full = Path(st.db_path).stat().st_size
        cfg = config()
        cfg["episodes"]["max_db_mb"] = round(full / 2 / 1024 / 1024, 3)
        dry = Dreamer(st, cfg).run(["light"], apply=False).results[0]
        assert dry.pruned and st.get("ep-000") is not None
        res = Dreamer(st, cfg).run(["light"], apply=True).results[0]
        assert any("INCREMENTAL" in n for n in res.notes)
        assert st.conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2
        left = [m["id"] for m in st.list_all(type="conversation", limit=1000, sort="created",
                                             order="asc")]  # fmt: skip
        assert st.get("ep-000") is None and st.get("ep-199") is not None
        assert left == sorted(left) and st.get("keep") is not None  # oldest went first
        st.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        assert Path(st.db_path).stat().st_size <= cfg["episodes"]["max_db_mb"] * 1024 * 1024
        assert res.backups and all(Path(b).exists() for b in res.backups)


def test_likeness_pairs_match_brute_force() -> None:
    texts = [
        "the deploy script runs on port 8080",
        "The deploy script runs on port 8081",
        "deploy script runs on port 8080 daily",
        "tabs not spaces",
        "tabs and spaces",
        "the deploy scripts run on port 8080",
    ] * 3
    sets = [words(t) for t in texts]
    groups = ["g"] * len(sets)
    for t in (0.3, 0.5, 0.8, 1.0):
        fast = {(i, j) for i, j, _ in similar_pairs(sets, groups, t)}
        from llmem_hooks.dream.likeness import jaccard

        slow = {
            (i, j)
            for i in range(len(sets))
            for j in range(i + 1, len(sets))
            if jaccard(sets[i], sets[j]) >= t
        }
        assert fast == slow, t


def test_cli_dry_run_apply_runs_and_undo(llmem_home: Path, capsys: Any) -> None:
    with MemoryStore(llmem_home / "memory.db") as st:
        seed(st)
    assert main(["dream"]) == 0
    out = capsys.readouterr().out
    assert "dry run" in out and "merged" in out and "--apply" in out
    assert main(["dream", "--apply", "--phase", "light"]) == 0
    out = capsys.readouterr().out
    run_id = out.split()[2]
    assert main(["dream", "--runs", "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    assert runs[0]["run_id"] == run_id and runs[0]["phases"] == "light"
    assert main(["dream", "--undo", run_id]) == 0
    assert "undid run" in capsys.readouterr().out
    assert main(["dream", "--undo", "nope"]) == 2
    assert main(["dream", "--phase", "nap"]) == 2
    assert main(["stats", "--json"]) == 0
    sizes = json.loads(capsys.readouterr().out)["sizes"]
    assert sizes["method"] in ("dbstat", "estimate") and sizes["tables"]["memories"] > 0
    assert any(p["project"] == P for p in sizes["projects"])


def test_sidecar_dreams_when_idle_at_most_once_per_interval(tmp_path: Path) -> None:
    """The worker runs the cycle when no session is active and the last run (kept in the
    store, so a restart counts) is an interval old; never twice within it."""
    import time

    from llmem_hooks import create_session_hook_coordinator
    from llmem_hooks.sidecar.loop import Sidecar
    from llmem_hooks.store.dream import list_runs

    cfg = config(idle_minutes=0)
    cfg["memory"]["db_path"] = str(tmp_path / "memory.db")
    cfg["ollama"]["enabled"] = False
    cfg["episodes"]["enabled"] = False
    with MemoryStore(tmp_path / "memory.db") as st:
        seed(st)

    def runs_after(passes: int) -> int:
        main, slow = (create_session_hook_coordinator(cfg, adapters={}) for _ in range(2))
        sidecar = Sidecar(main, cfg, worker=slow)
        try:
            for _ in range(passes):
                sidecar._dream_at = 0.0  # no wait between checks in a test
                sidecar.tick()
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline and not (
                    sidecar.worker is not None and sidecar.worker.jobs.empty()
                ):
                    time.sleep(0.02)
                time.sleep(0.2)
            return len(list_runs(main.store))
        finally:
            assert sidecar.worker is not None
            sidecar.worker.close()
            for c in (main, slow):
                c.store.close()

    assert runs_after(3) == 1  # first start: owed once, then not again
    assert runs_after(2) == 1  # a restart within the interval: still one
    with MemoryStore(tmp_path / "memory.db") as st:
        st.conn.execute("UPDATE dream_state SET value = ? WHERE key = 'last_run_at'", (ago(2),))
        assert st.get("dup-a")["valid_until"] is not None  # the sidecar's run applied
    assert runs_after(2) == 2  # a day later: owed again


def test_service_units_and_the_metacharacter_refusal(llmem_home: Path, tmp_path: Path) -> None:
    from llmem_hooks.agents.schedule import (
        install_service,
        launchd_plist,
        timer_unit,
        uninstall_service,
        validate_schedule,
    )
    from llmem_hooks.errors import ValidationError

    cmd = ["/opt/llmem/bin/llmem-hooks", "dream", "--apply", "--trigger", "timer"]
    lines: list[str] = []
    files = install_service("*-*-* 04:30:00", platform="linux", command=cmd, report=lines.append)
    service, timer = (f.read_text() for f in files)
    assert files[0].parent == tmp_path / "xdg-config" / "systemd" / "user" or "systemd/user" in str(
        files[0]
    )
    assert f"ExecStart={' '.join(cmd)}" in service and "Type=oneshot" in service
    assert f"Environment=LLMEM_HOME={llmem_home}" in service
    assert "OnCalendar=*-*-* 04:30:00" in timer and "Persistent=true" in timer
    assert "WantedBy=timers.target" in timer
    assert any("systemctl --user" in line for line in lines)  # printed, never run
    for bad in ("$(evil)", "`id`", "daily; rm -rf ~", "daily\nExecStart=/bin/sh", "a|b", "'x'"):
        assert not validate_schedule(bad)
        with pytest.raises(ValidationError):
            timer_unit(bad)
        with pytest.raises(ValidationError):
            install_service(bad, platform="linux", command=cmd)
    assert validate_schedule("Mon..Fri *-*-* 03:00:00") and validate_schedule("daily")
    with pytest.raises(ValidationError, match="unit file"):
        install_service("daily", platform="linux", command=["/opt/x$HOME/llmem-hooks"])
    plist = launchd_plist(cmd, "*-*-* 04:30:00", llmem_home)
    assert "<integer>4</integer>" in plist and "<integer>30</integer>" in plist
    assert "<string>--apply</string>" in plist
    with pytest.raises(ValidationError, match="macOS"):
        launchd_plist(cmd, "Mon *-*-* 03:00", llmem_home)
    mac = install_service("03:15", platform="darwin", command=cmd)
    assert mac[0].name == "com.llmem-hooks.dream.plist" and mac[0].exists()
    foreign = files[1]
    assert uninstall_service(platform="linux") == files
    assert not any(f.exists() for f in files)
    foreign.write_text("[Timer]\nOnCalendar=daily\n")  # not ours: left alone
    assert uninstall_service(platform="linux") == [] and foreign.exists()
    assert uninstall_service(platform="darwin") == mac


def test_cli_install_service_and_a_bad_schedule(llmem_home: Path, capsys: Any) -> None:
    import sys

    if not sys.platform.startswith("linux"):
        pytest.skip("the CLI writes the unit files of this machine's platform")
    assert main(["install", "--service"]) == 0
    out = capsys.readouterr().out
    assert "llmem-hooks-dream.timer" in out and "enable it with" in out
    assert main(["uninstall", "--service"]) == 0
    assert "removed" in capsys.readouterr().out
    (llmem_home / "config.yaml").write_text("dream:\n  schedule: '$(reboot)'\n")
    assert main(["install", "--service"]) == 2
    assert "dream.schedule" in capsys.readouterr().err


def test_with_vectors_merges_by_cosine_and_links_below_it(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "vec.db", vec_dimensions=4) as st:
        a = st.add("fact", "Staging deploys need the VPN.", project=P, confidence=0.9,
                   embedding=[1.0, 0.0, 0.0, 0.0], dedupe=False)  # fmt: skip
        b = st.add("fact", "You must be on the company VPN to ship to staging.", project=P,
                   embedding=[0.99, 0.05, 0.0, 0.0], dedupe=False)  # fmt: skip
        c = st.add("fact", "The VPN client is WireGuard.", project=P,
                   embedding=[0.85, 0.5, 0.1, 0.0], dedupe=False)  # fmt: skip
        d = st.add("fact", "Lunch is at noon.", project=P,
                   embedding=[0.0, 0.0, 1.0, 0.0], dedupe=False)  # fmt: skip
        run = Dreamer(st, config()).run(["light", "rem"], apply=True)
        light, rem = run.results
        assert [(g["id"], [o["id"] for o in g["merged"]]) for g in light.merged] == [(a, [b])]
        assert light.merged[0]["merged"][0]["by"] == "embedding"
        assert st.get(b)["valid_until"] is not None and st.get(d)["valid_until"] is None
        assert {(x["id"], x["target"]) for x in rem.linked} == {tuple(sorted((a, c)))}
