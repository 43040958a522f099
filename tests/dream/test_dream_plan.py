"""A dream dry run says what ``--apply`` then does (issue 20: 86 decays predicted, 82
applied). The dry run rehearses the applied cycle on a private copy of the store, so a
memory merged away or superseded is not also decayed, boosted or flagged, a merge's summed
recalls can earn a boost, and the size cap's rounds are the ones apply makes. A realistic
store where merges, forgets (superseded, expired), decays, boosts, links, stale flags,
inbox promotions and episode pruning all happen: every count and every listed row of the
dry run equals the apply's on the same store; the store is untouched by the plan; undo
puts everything back."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from llmem_hooks import Dreamer, MemoryStore
from llmem_hooks.cli import main
from llmem_hooks.config import DEFAULT_CONFIG
from llmem_hooks.store import projects
from llmem_hooks.store.snapshot import PREFIX

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
API = "1f0c" + "a" * 36  # root-commit keys, as projects are stored
WEB = "2b7d" + "b" * 36
SERVICES = ["billing", "ledger", "gateway", "search", "mailer", "scheduler", "auth", "chat",
            "export", "import", "reports", "uploads"]  # fmt: skip
STORES = ["PostgreSQL 16", "Redis 7", "SQLite", "MySQL 8", "DynamoDB", "Cassandra",
          "ClickHouse", "MongoDB 7", "Elasticsearch", "S3 buckets", "etcd", "Kafka"]  # fmt: skip


def dump(store: MemoryStore) -> dict[str, Any]:
    """Everything a person could tell apart: every column of every memory (but the row
    number), tags, relations, the inbox, the dream book's row counts, the FTS rows."""
    conn = store.conn

    def rows(sql: str) -> list[tuple[Any, ...]]:
        return sorted(tuple(r) for r in conn.execute(sql))

    mems = {}
    for row in conn.execute("SELECT * FROM memories"):
        d = dict(row)
        d.pop("seq")
        mems[d.pop("id")] = d
    return {
        "memories": mems,
        "tags": rows("SELECT m.id, t.name FROM memory_tags mt JOIN memories m"
                     " ON m.seq = mt.memory_seq JOIN tags t ON t.id = mt.tag_id"),
        "relations": rows("SELECT source_id, target_id, relation_type FROM relations"),
        "inbox": rows("SELECT * FROM inbox"),
        "book": [conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                 for t in ("dream_runs", "dream_changes", "dream_state")],
        "fts": conn.execute("SELECT count(*) FROM memories_fts").fetchone()[0],
    }  # fmt: skip


def ago(days: float, now: datetime = NOW) -> str:
    return (now - timedelta(days=days)).isoformat()


def config(**dream: Any) -> dict[str, Any]:
    cfg = {k: dict(v) for k, v in DEFAULT_CONFIG.items()}
    cfg["dream"].update(dream)
    return cfg


def realistic(store: MemoryStore, now: datetime = NOW) -> None:
    """~150 memories over two named projects, as months of sessions leave them."""
    rows: list[dict[str, Any]] = []

    def ago(days: float) -> str:
        return (now - timedelta(days=days)).isoformat()

    def add(mid: str, content: str, days: float, project: str | None = API, **kw: Any) -> None:
        rows.append({"id": mid, "type": "fact", "content": content, "project": project,
                     "created_at": ago(days), **kw})  # fmt: skip

    for i, svc in enumerate(SERVICES):
        for j in range(6):
            project = API if (i + j) % 2 else WEB
            n = i * 6 + j
            # unused for months: decays (and their near-twins link)
            add(f"fact-{n:03d}", f"The {svc} service keeps its records in {STORES[(i + j) % 12]}"
                f" since release {n}.", 60 + n % 40, project,
                confidence=round(0.5 + (n % 5) / 10, 2))  # fmt: skip
    # old reworded duplicates: merged away, so never decayed too (the reported bug)
    for n in range(0, 72, 6):
        src = next(r for r in rows if r["id"] == f"fact-{n:03d}")
        add(f"dup-{n:03d}", src["content"].lower().rstrip("."), 80, src["project"],
            confidence=0.9)  # fmt: skip
    # twins recalled twice each: merged, their recalls sum to a boost
    for n in range(3):
        text = f"Run make check-{n} before every push to the {SERVICES[n]} repo."
        for side in "ab":
            add(
                f"used-{n}{side}",
                text if side == "a" else text.lower(),
                70,
                API,
                type="procedure",
                access_count=2,
                accessed_at=ago(2),
                confidence=0.6,
            )
    # forgotten by a newer change statement: superseded, so never decayed or flagged
    for n, (old, new) in enumerate([("Jenkins", "GitHub Actions"), ("Slack", "Zulip"),
                                    ("Heroku", "Fly.io"), ("Travis", "Buildkite")]):  # fmt: skip
        add(f"old-tool-{n}", f"Builds of the {SERVICES[n]} team run on {old}.", 120, API,
            type="procedure")  # fmt: skip
        add(f"moved-{n}", f"We moved from {old} to {new} for the {SERVICES[n]} team.", 1, API,
            type="decision")  # fmt: skip
    # recalled often: boosted
    for n in range(4):
        add(f"hot-{n}", f"The {SERVICES[n + 4]} dashboard lives at port {8000 + n}.", 50, WEB,
            access_count=6, accessed_at=ago(1))  # fmt: skip
    # expired; old procedures (stale); global ones; fresh ones left alone
    for n in range(5):
        add(f"expired-{n}", f"The demo token {n} works until Friday.", 10, WEB,
            expires_at=ago(1))  # fmt: skip
        add(f"proc-{n}", f"To release {SERVICES[n]}, tag the commit and push tag {n}.", 200,
            WEB, type="procedure")  # fmt: skip
        add(f"global-{n}", f"Prefer ripgrep flag -{'abcde'[n]} when searching code.", 95, None,
            type="preference")  # fmt: skip
        add(f"fresh-{n}", f"The {SERVICES[n]} on-call rota changes every {n + 2} weeks.", 0)
    for n in range(6):  # conversation records past their retention
        add(f"episode-{n}", f"user: how do I deploy {n}?\nassistant: make deploy-{n}", 400, API,
            type="conversation", source="episode", session_id=f"s{n}")  # fmt: skip
    assert store.import_memories(rows) == len(rows)
    projects.set_name(store.db, API, "acme/api")
    projects.set_name(store.db, WEB, "acme/web")
    store.add_to_inbox("Remember: the staging DB is read-only on weekends.", attention_score=0.8)
    store.add_to_inbox("maybe something about lunch", attention_score=0.2)


def _rows(run: Any) -> dict[str, dict[str, list[Any]]]:
    """Every listed row of a run, by phase and kind, as comparable values (a promoted
    inbox item's new id exists only once applied, so it is left out)."""
    out: dict[str, dict[str, list[Any]]] = {}
    for r in run.results:
        kinds: dict[str, list[Any]] = {}
        for kind in r.COUNTED:
            items = []
            for item in getattr(r, kind):
                item = dict(item)
                if kind == "consolidated":
                    item.pop("id", None)
                    item.pop("planned", None)
                items.append(json.dumps(item, sort_keys=True, default=str))
            if items:
                kinds[kind] = items
        out[r.phase] = kinds
    return out


def _plan_then_apply(path: Path, **dream: Any) -> tuple[Any, Any, dict[str, Any]]:
    with MemoryStore(path) as st:
        realistic(st)
        before = dump(st)
        plan = Dreamer(st, config(**dream), now=NOW).run(apply=False)
        assert dump(st) == before, "the dry run wrote to the store"
        done = Dreamer(st, config(**dream), now=NOW).run(apply=True)
    return plan, done, before


def test_every_count_and_row_of_the_dry_run_is_what_apply_does(
    tmp_path: Path, llmem_home: Path
) -> None:
    plan, done, _ = _plan_then_apply(tmp_path / "memory.db")
    counts = done.counts()
    # everything happens in this store (else the comparison proves little)
    for phase, kinds in {
        "light": ("retired", "merged", "pruned"),
        "deep": ("consolidated", "evicted", "superseded", "boosted", "decayed"),
        "rem": ("linked", "stale"),
    }.items():
        for kind in kinds:
            assert counts[phase].get(kind), (phase, kind, counts)
    assert plan.counts() == counts
    assert _rows(plan) == _rows(done)
    light, deep, rem = done.results
    gone = {o["id"] for g in light.merged for o in g["merged"]}
    gone |= {s["id"] for s in deep.superseded}
    assert len(gone) >= 16
    # what the old plan got wrong: the forgotten ones decayed or flagged as well
    assert not gone & {d["id"] for d in deep.decayed}
    assert not gone & {s["id"] for s in rem.stale}
    # a merge's summed recalls (2 + 2 >= 3) earn the boost in the plan too
    assert {b["id"] for b in deep.boosted} >= {"used-0a", "used-1a", "used-2a"} or {
        b["id"] for b in deep.boosted
    } >= {"used-0b", "used-1b", "used-2b"}
    # the plan wrote no backup, diary or report, and left no copy behind
    assert not (llmem_home / "backups").exists() or len(done.results[0].backups) == len(
        list((llmem_home / "backups").iterdir())
    )
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(PREFIX)]


def test_the_size_caps_rounds_are_planned_as_applied(tmp_path: Path, llmem_home: Path) -> None:
    """Above ``episodes.max_db_mb`` apply prunes round after round, measuring what each
    freed; the plan, rehearsed on a page-for-page copy, makes the same rounds."""
    path = tmp_path / "memory.db"
    with MemoryStore(path) as st:
        filler = "lorem ipsum dolor sit amet " * 300
        st.import_memories(
            [{"id": f"ep-{n:04d}", "type": "conversation", "source": "episode",
              "content": f"user: question {n}\nassistant: {filler}", "project": API,
              "session_id": f"t{n}", "created_at": ago(30 - n / 100)}
             for n in range(400)]
        )  # fmt: skip
    cfg = config()
    cfg["episodes"]["max_db_mb"] = 2.0
    with MemoryStore(path) as st:
        plan = Dreamer(st, cfg, now=NOW).run(["light"], apply=False)
        done = Dreamer(st, cfg, now=NOW).run(["light"], apply=True)
    assert len(done.results[0].pruned) >= 1
    assert plan.results[0].pruned == done.results[0].pruned
    assert plan.counts() == done.counts()


def test_undo_after_the_planned_apply_restores_everything(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    _, done, before = _plan_then_apply(path)
    with MemoryStore(path) as st:
        Dreamer(st, config(), now=NOW).undo(done.run_id)
        after = dump(st)
    for key in ("memories", "tags", "relations", "inbox", "fts"):
        assert after[key] == before[key], key


def test_cli_dry_run_counts_equal_the_applied_ones(llmem_home: Path, capsys: Any) -> None:
    """Through the real CLI on LLMEM_HOME's store (the real clock: every date in the
    store is days away from a boundary)."""
    with MemoryStore(llmem_home / "memory.db") as st:
        realistic(st, datetime.now(UTC))
    assert main(["dream", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert main(["dream", "--apply", "--json"]) == 0
    done = json.loads(capsys.readouterr().out)

    def counts(run: dict[str, Any]) -> dict[str, dict[str, int]]:
        return {
            r["phase"]: {k: len(r[k]) for k in ("retired", "merged", "pruned", "consolidated",
                         "evicted", "superseded", "boosted", "decayed", "linked", "stale")}
            for r in run["results"]
        }  # fmt: skip

    assert counts(plan) == counts(done)
    assert counts(done)["deep"]["decayed"] > 50
    assert not [p for p in llmem_home.iterdir() if p.name.startswith(PREFIX)]
    assert main(["dream", "--undo", done["run_id"]]) == 0
    assert "undid run" in capsys.readouterr().out


@pytest.mark.parametrize("how", ["in-memory", "unwritable folder"])
def test_without_a_copy_the_plan_says_it_may_overcount(tmp_path: Path, how: str) -> None:
    """No private copy (an in-memory store, a folder we cannot write): the plan still
    comes, each step on the unchanged store, and says that apply may do less."""
    import os

    folder = tmp_path / "ro"
    folder.mkdir()
    st = MemoryStore(":memory:" if how == "in-memory" else folder / "memory.db")
    try:
        realistic(st)
        if how != "in-memory":
            os.chmod(folder, 0o500)
            if os.access(folder, os.W_OK):
                pytest.skip("this user can write any folder (root)")
        plan = Dreamer(st, config(), now=NOW).run(apply=False)
        assert any("--apply may do less" in n for n in plan.results[0].notes)
        assert plan.counts()["deep"]["decayed"]
    finally:
        st.close()
        os.chmod(folder, 0o700)


def test_with_vectors_the_plan_is_what_apply_does(tmp_path: Path) -> None:
    """The copy carries the sqlite-vec tables: merges and links by cosine are planned as
    applied, and the vectors of the store itself are untouched by the plan."""
    import math

    path = tmp_path / "vec.db"
    with MemoryStore(path, vec_dimensions=4) as st:
        for n in range(12):  # pairs 5 degrees apart merge; pairs 30 degrees apart link
            angle = math.radians((n // 2) * 30 + (n % 2) * 5)
            vec = [math.cos(angle), math.sin(angle), 0.0, 0.0]
            st.add("fact", f"Vector memory {n} about subsystem {SERVICES[n % 12]}.",
                   project=API, embedding=vec, dedupe=False, created_at=ago(80))  # fmt: skip
        before = dump(st)
        vectors = st.conn.execute("SELECT count(*) FROM memories_vec").fetchone()[0]
        plan = Dreamer(st, config(), now=NOW).run(apply=False)
        assert dump(st) == before
        assert st.conn.execute("SELECT count(*) FROM memories_vec").fetchone()[0] == vectors == 12
        done = Dreamer(st, config(), now=NOW).run(apply=True)
    assert done.counts()["light"].get("merged") and done.counts()["rem"].get("linked")
    assert any(g["merged"][0]["by"] == "embedding" for g in done.results[0].merged)
    assert plan.counts() == done.counts()
    assert _rows(plan) == _rows(done)
