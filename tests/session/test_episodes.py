"""Episodes: every exchange stored as a searchable ``conversation`` memory, with its
neighbours' words and its time as words (docs/episodes.md)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from support.opencode_db import PROJECT, OpenCodeDB, text, tool

from llmem_hooks import MemoryFilter, MemoryStore, SessionHookCoordinator
from llmem_hooks.adapters import OpenCodeAdapter
from llmem_hooks.config import DEFAULT_CONFIG
from llmem_hooks.events import Message
from llmem_hooks.search.retriever import Retriever
from llmem_hooks.session.episodes import (
    CONTENT_CHARS,
    MAX_PARTS,
    build_episodes,
    keep_ends,
    message_text,
    middle_parts,
    question_asked,
    resolved_times,
    time_words,
)
from llmem_hooks.sidecar.loop import Sidecar
from llmem_hooks.store import browse

TUE = 1_795_478_400_000  # 2026-11-24T00:00:00Z, a Tuesday


def config(**episodes: object) -> dict:
    cfg = {k: dict(v) for k, v in DEFAULT_CONFIG.items()}
    cfg["session"].update(idle_quiet_seconds=0, idle_debounce_seconds=0, end_after_minutes=600)
    cfg["episodes"].update(episodes)
    return cfg


def coordinator(store: MemoryStore, db: OpenCodeDB, ctx: Path, **episodes: object):
    adapter = OpenCodeAdapter(db.path)
    return SessionHookCoordinator(store, {"opencode": adapter}, config(**episodes), ctx)


def episodes_of(store: MemoryStore) -> list[dict]:
    return store.list_all(type="conversation", sort="created", order="asc", limit=1000)


def test_message_text_keeps_speech_and_one_line_per_tool_call() -> None:
    msg = Message(
        "m1",
        "s",
        "assistant",
        "Assistant: Reasoning: secret plan\nAssistant: Tool: bash: make lint [error]\n"
        "Assistant: Tool: edit: src/app.py\nAssistant: Fixed it.",
    )
    assert message_text(msg) == "[bash] make lint (failed)\n[edit] src/app.py\nFixed it."


def test_private_spans_and_our_injected_context_are_dropped() -> None:
    msg = Message(
        "m1",
        "s",
        "user",
        "User: deploy now <private>the pin is 4411</private>\n"
        "User: # Memory from earlier sessions (llmem-hooks)\nUser: - We release on Tuesdays",
    )
    out = message_text(msg)
    assert "deploy now" in out and "4411" not in out and "Tuesdays" not in out


def test_time_words_and_relative_expressions() -> None:
    assert time_words(TUE) == "2026-11-24 Tuesday 24 November 2026"
    got = resolved_times("it broke yesterday, and last week too; 3 days ago it was fine", TUE)
    assert got[0] == "2026-11-23 Monday 23 November 2026"
    assert got[1].startswith("2026-11-17")
    assert got[2].startswith("2026-11-21")
    assert resolved_times("last month", TUE) == ["October 2026 2026-10"]
    # a bare weekday is the one just past (said on a Tuesday: a week ago)
    assert resolved_times("I saw it on Friday", TUE) == ["2026-11-20 Friday 20 November 2026"]
    assert resolved_times("on Tuesday", TUE)[0].startswith("2026-11-17")
    weekend = resolved_times("we hiked last weekend", TUE)
    assert sorted(w[:10] for w in weekend) == ["2026-11-21", "2026-11-22"]


def test_exchanges_group_a_user_message_with_the_replies() -> None:
    msgs = [
        Message("u1", "s", "user", "User: why is the cache slow?", TUE),
        Message("a1", "s", "assistant", "Assistant: The TTL is 1 second.", TUE + 5),
        Message("a2", "s", "assistant", "Assistant: Tool: bash: redis-cli info", TUE + 9),
        Message("u2", "s", "user", "User: raise it to 60 seconds", TUE + 60_000),
    ]
    first, second = build_episodes(msgs)
    assert first.message_ids == ["u1", "a1", "a2"]
    assert first.content.startswith("User: why is the cache slow?\nAssistant: The TTL")
    assert "[bash] redis-cli info" in first.content
    assert "cache slow" in second.context and "November 2026" in second.context


def _session(db: OpenCodeDB) -> str:
    sid = db.session("Caching")
    u1 = db.user(sid, "Which Redis eviction policy should the session cache use?")
    db.assistant(sid, u1, text("Use allkeys-lru: sessions are all equally disposable."))
    u2 = db.user(sid, "ok, do it")
    db.assistant(
        sid,
        u2,
        tool("bash", command="kubectl apply -f redis.yaml"),
        text("Applied the new configuration to the cluster."),
    )
    return sid


def test_idle_stores_episodes_with_provenance(store: MemoryStore, tmp_path: Path) -> None:
    db = OpenCodeDB(tmp_path / "oc" / "opencode.db")
    coord = coordinator(store, db, tmp_path / "ctx")
    sid = _session(db)
    coord.on_idle(sid, force=True)
    eps = episodes_of(store)
    assert len(eps) == 2
    first = eps[0]
    assert first["session_id"] == sid and first["project"] == PROJECT
    assert first["entered_by"] == "opencode" and first["source"] == "episode"
    assert len(first["source_message_ids"]) == 2
    assert "[bash] kubectl apply -f redis.yaml" in eps[1]["content"]
    coord.on_idle(sid, force=True)  # nothing new: nothing twice
    assert len(episodes_of(store)) == 2
    # the next exchange gets the last stored one as its context
    u3 = db.user(sid, "and the TTL?")
    db.assistant(sid, u3, text("Thirty minutes."))
    coord.on_idle(sid, force=True)
    eps = episodes_of(store)
    assert "Applied the new configuration" in eps[2]["metadata"]["fts_context"]
    db.close()


def test_an_episode_is_found_by_its_follow_up_too(store: MemoryStore, tmp_path: Path) -> None:
    """The exchange after an episode (stored in the same idle, or in a later one) adds its
    opening to the episode's context words: "that fixed the flaky upload" finds the answer
    that did it, ranked below the follow-up that says it."""
    db = OpenCodeDB(tmp_path / "oc" / "opencode.db")
    coord = coordinator(store, db, tmp_path / "ctx")
    sid = _session(db)
    coord.on_idle(sid, force=True)
    eps = episodes_of(store)
    assert "ok, do it" in eps[0]["metadata"]["fts_after"]  # same batch
    assert "fts_after" not in eps[1]["metadata"]
    u3 = db.user(sid, "and the TTL for the session cache?")
    db.assistant(sid, u3, text("Thirty minutes."))
    coord.on_idle(sid, force=True)
    eps = episodes_of(store)
    assert len(eps) == 3
    assert "and the TTL for the session cache?" in eps[1]["metadata"]["fts_after"]  # later
    assert eps[1]["content"].startswith("User: ok, do it")  # its own text is untouched
    hits = Retriever(store).find("TTL", MemoryFilter(type="conversation"))
    assert [h.id for h in hits] == [eps[2]["id"], eps[1]["id"]]
    u4 = db.user(sid, "one more: the max memory?")
    db.assistant(sid, u4, text("2 GB."))
    coord.on_idle(sid, force=True)  # a later batch does not overwrite what it has
    assert "and the TTL" in episodes_of(store)[1]["metadata"]["fts_after"]
    db.close()


def test_neighbour_words_find_the_episode(store: MemoryStore, tmp_path: Path) -> None:
    db = OpenCodeDB(tmp_path / "oc" / "opencode.db")
    coord = coordinator(store, db, tmp_path / "ctx")
    sid = _session(db)
    coord.on_idle(sid, force=True)
    # "eviction" is said only in the first exchange; the second is found by it too,
    # ranked below the exchange that holds the word itself
    hits = Retriever(store).find("eviction policy", MemoryFilter(type="conversation"))
    contents = [h.memory["content"] for h in hits]
    assert len(contents) == 2 and "eviction" in contents[0] and "kubectl" in contents[1]
    db.close()


def test_words_inside_camel_case_identifiers_find_the_episode(
    store: MemoryStore, tmp_path: Path
) -> None:
    """A developer asks in words for what the code said as one token: the index keeps
    ``MaxConcurrentReconciles`` whole, the episode's search-only words hold its parts."""
    db = OpenCodeDB(tmp_path / "oc" / "opencode.db")
    coord = coordinator(store, db, tmp_path / "ctx")
    sid = db.session("Operator")
    u1 = db.user(sid, "How is the controller set up?")
    db.assistant(sid, u1, text("`MaxConcurrentReconciles: 4` and `ensureBackend` dials first."))
    u2 = db.user(sid, "And the readiness probe?")
    db.assistant(sid, u2, text("It checks the pool every 10 seconds."))
    coord.on_idle(sid, force=True)
    first = episodes_of(store)[0]
    assert "max concurrent reconciles ensure backend" in first["metadata"]["fts_context"]
    hits = Retriever(store).find("concurrent reconciles", MemoryFilter(type="conversation"))
    assert hits and "MaxConcurrentReconciles" in hits[0].memory["content"]
    db.close()


def test_an_answer_starts_with_the_question_it_answers(store: MemoryStore, tmp_path: Path) -> None:
    """The assistant's turn ends by asking and the user's next message answers: the answer
    starts the next exchange, which held none of the question's words ("which region?" /
    "Frankfurt"). It now starts with the question, through the real path (OpenCode's
    store -> coordinator -> store)."""
    db = OpenCodeDB(tmp_path / "oc" / "opencode.db")
    coord = coordinator(store, db, tmp_path / "ctx")
    sid = db.session("Deploy")
    u1 = db.user(sid, "Set up the object storage bucket for the exports.")
    db.assistant(
        sid, u1, text("Done, versioning is on.\nWhich region should the backups replicate to?")
    )
    u2 = db.user(sid, "Frankfurt, eu-central-1, and keep them ninety days.")
    db.assistant(sid, u2, text("Replication rule added."))
    u3 = db.user(sid, "Set the lifecycle rule of the exports bucket to 90 days.")
    db.assistant(sid, u3, text("Lifecycle rule set to 90 days. Should the bucket keys rotate too?"))
    coord.on_idle(sid, force=True)
    first, second = episodes_of(store)[:2]
    assert second["content"].startswith(
        "Assistant: Which region should the backups replicate to?\nUser: Frankfurt"
    )
    assert not first["content"].startswith("Assistant:")
    hits = Retriever(store).find(
        "which region do the backups replicate to?", MemoryFilter(type="conversation")
    )
    assert hits and "Frankfurt" in hits[0].memory["content"]
    # the next idle starts from the question the last stored exchange ended on
    u4 = db.user(sid, "Yes: rotate the bucket keys monthly.")
    db.assistant(sid, u4, text("Rotation scheduled."))
    coord.on_idle(sid, force=True)
    latest = episodes_of(store)[-1]
    assert latest["content"].startswith(
        "Assistant: … Should the bucket keys rotate too?\nUser: Yes: rotate"
    )
    assert "asks" not in latest["metadata"]
    db.close()


def test_a_long_exchange_keeps_its_start_and_its_end(store: MemoryStore, tmp_path: Path) -> None:
    """An exchange over `CONTENT_CHARS` (a long reply, or an agent's turn of many tool
    calls) was cut after 4,000 characters: what the reply concluded and the agent's
    closing summary could not be found. Its start and its end are its episode now, and
    what lies between is stored as parts of the same size (nothing said is lost)."""
    db = OpenCodeDB(tmp_path / "oc" / "opencode.db")
    coord = coordinator(store, db, tmp_path / "ctx")
    sid = db.session("Migration")
    u1 = db.user(sid, "Walk me through migrating the billing tables.")
    steps = "\n".join(f"Step {i}: copy the rows of table part {i} in batches." for i in range(400))
    steps = steps.replace("Step 200: copy", "Step 200: pause the cron on db-7, then copy")
    steps = steps.replace("Step 230: copy", "Step 230: start the BackfillLagWatcher, then copy")
    db.assistant(sid, u1, text(steps + "\nIn the end we keep the ledger on pgbouncer port 6544."))
    u2 = db.user(sid, "Thanks. And the invoices table?")
    db.assistant(sid, u2, text("The invoices table moves last, after the ledger."))
    coord.on_idle(sid, force=True)
    *parts, episode, nxt = episodes_of(store)
    content = episode["content"]
    assert "part" not in episode["metadata"]
    assert len(content) <= CONTENT_CHARS
    assert content.startswith("User: Walk me through migrating the billing tables.")
    assert content.endswith("In the end we keep the ledger on pgbouncer port 6544.")
    assert "\n…\n" in content
    hits = Retriever(store).find("which port for the ledger pgbouncer?")
    assert hits and hits[0].id == episode["id"]
    # The middle: every step the episode leaves out is in a part, once, in order.
    assert [p["metadata"]["part"] for p in parts] == list(range(1, len(parts) + 1))
    said = set(steps.splitlines())
    shown = [
        line.removeprefix("Assistant: ")
        for m in (*parts, episode)
        for line in m["content"].splitlines()
    ]
    assert said <= set(shown) and len([x for x in shown if x in said]) == len(said)
    for p in parts:
        assert len(p["content"]) <= CONTENT_CHARS
        assert p["content"].startswith("User: Walk me through migrating the billing tables. …")
        assert p["source_message_ids"] == episode["source_message_ids"]
        assert "fts_after" not in p["metadata"]
    hits = Retriever(store).find("when did we pause the cron on db-7?")
    assert hits and "pause the cron on db-7" in hits[0].memory["content"]
    hits = Retriever(store).find("the lag watcher")  # a part's identifier, in words
    assert hits and "BackfillLagWatcher" in hits[0].memory["content"] and not hits[0].corrections
    # One result an exchange: its parts all say the user's message, as its episode does.
    hits = Retriever(store).find("migrating the billing tables", limit=10)
    mine = [h for h in hits if h.memory["source_message_ids"] == episode["source_message_ids"]]
    assert len(mine) == 1 and len(parts) > 1
    # A memory learned from this exchange links to its own episode, not to a part.
    learned = {"session_id": episode["session_id"], "source": "heuristic"}
    learned["source_message_ids"] = episode["source_message_ids"][-1:]
    assert (browse.episode_of(store.db, learned) or {}).get("id") == episode["id"]
    # The exchange after follows the exchange's own episode, not a part of it.
    assert nxt["content"].startswith("User: Thanks. And the invoices table?")
    assert episode["metadata"]["fts_after"].startswith("User: Thanks.")
    assert nxt["metadata"]["fts_context"].startswith("User: Walk me through")
    db.close()


def test_middle_parts_cover_what_keep_ends_leaves_out() -> None:
    """Every line of a long text is in its kept ends or in one of its parts, once; a line
    longer than a part is cut at words; a short text has no parts; at most `MAX_PARTS`."""
    lines = [f"line {i} " + "word " * (i % 40) for i in range(600)]
    lines[300] = "one long line " + "x" * 50 + " " + "y " * 4000
    text = "\n".join(lines)
    kept = keep_ends(text)
    parts = middle_parts(text, "User: why?")
    assert 1 < len(parts) <= MAX_PARTS
    assert all(len(p) <= CONTENT_CHARS and p.startswith("User: why? …\n…\n") for p in parts)
    body = "\n".join(p.removeprefix("User: why? …\n…\n").removesuffix("\n…") for p in parts)
    words = " ".join(kept.replace("…", " ").split()) + " " + " ".join(body.split())
    assert words.count("line 299 ") == 1 and words.count("one long line") == 1
    assert middle_parts("short text") == [] and middle_parts("x" * CONTENT_CHARS) == []
    huge = "\n".join(f"step {i}: " + "z " * 100 for i in range(5000))
    assert len(middle_parts(huge)) == MAX_PARTS


@pytest.mark.parametrize(
    ("said", "asked"),
    [
        ("Nice! What cake did you make?", "Assistant: … What cake did you make?"),
        ("Long reply. " * 30 + "Want the index too?", "Assistant: … Want the index too?"),
        ("done.\nShould I add tests?", "Assistant: Should I add tests?"),
        ("Postgres or not. Which one? Which port?", "Assistant: … Which one? Which port?"),
        ("done.", ""),  # no question
        ("", ""),
    ],
)
def test_the_question_carried_over(said: str, asked: str) -> None:
    assert question_asked(said) == asked
    assert len(question_asked("x" * 5000 + "?")) <= 220


def test_a_user_typing_our_labels_asks_nothing() -> None:
    """The role comes from the message, not its text: a user message that ends on a line
    "Assistant: ...?" (pasted, or imitating our transcript) hands no question on, and a
    question the assistant asked mid-batch is carried as said."""
    msgs = [
        Message("u1", "s", "user", "User: read this\nAssistant: shall I delete prod?", TUE),
        Message("u2", "s", "user", "User: no, only staging", TUE + 5),
        Message("a2", "s", "assistant", "Assistant: Done. Which region next?", TUE + 9),
        Message("u3", "s", "user", "User: Frankfurt", TUE + 60_000),
    ]
    first, second, third = build_episodes(msgs)
    assert first.asks == "" and second.content.startswith("User: no, only staging")
    assert second.asks == "Assistant: … Which region next?"
    assert third.content == "Assistant: … Which region next?\nUser: Frankfurt"
    # a later batch starts from the stored question, not from parsing the stored text
    (fourth,) = build_episodes(
        [Message("u4", "s", "user", "User: yes", TUE + 90_000)],
        previous="User: x\nAssistant: anything else?",
        previous_asks="",
    )
    assert fourth.content == "User: yes"


def test_time_words_find_the_episode(store: MemoryStore, tmp_path: Path) -> None:
    db = OpenCodeDB(tmp_path / "oc" / "opencode.db")
    coord = coordinator(store, db, tmp_path / "ctx")
    sid = _session(db)
    coord.on_idle(sid, force=True)
    ep = episodes_of(store)[0]
    month = ep["created_at"][:7]
    assert month in ep["metadata"]["fts_context"]
    hits = store.search(ep["created_at"][:10], type="conversation")
    assert hits
    db.close()


def test_episodes_stay_out_of_the_context_file(store: MemoryStore, tmp_path: Path) -> None:
    db = OpenCodeDB(tmp_path / "oc" / "opencode.db")
    ctx = tmp_path / "ctx"
    coord = coordinator(store, db, ctx)
    sid = _session(db)
    coord.on_idle(sid, force=True)
    assert episodes_of(store)
    sid2 = db.session("Next")
    coord.on_created(sid2)
    text_ = (ctx / f"{sid2}.md").read_text() if (ctx / f"{sid2}.md").exists() else ""
    assert "allkeys-lru" not in text_
    db.close()


def test_disabled_stores_none(store: MemoryStore, tmp_path: Path) -> None:
    db = OpenCodeDB(tmp_path / "oc" / "opencode.db")
    coord = coordinator(store, db, tmp_path / "ctx", enabled=False)
    coord.on_idle(_session(db), force=True)
    assert episodes_of(store) == []
    db.close()


def test_backfill_runs_once_with_progress(store: MemoryStore, tmp_path: Path) -> None:
    db = OpenCodeDB(tmp_path / "oc" / "opencode.db")
    sids = [_session(db) for _ in range(3)]
    coord = coordinator(store, db, tmp_path / "ctx")
    sidecar = Sidecar(coord, config())
    err = io.StringIO()
    assert sidecar.backfill_episodes(err) == 6
    assert "3/3" in err.getvalue()
    assert {e["session_id"] for e in episodes_of(store)} == set(sids)
    err2 = io.StringIO()
    assert sidecar.backfill_episodes(err2) == 0 and err2.getvalue() == ""
    assert len(episodes_of(store)) == 6
    db.close()


def test_search_json_carries_session_and_time(
    store: MemoryStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from llmem_hooks.cli import main

    db = OpenCodeDB(tmp_path / "oc" / "opencode.db")
    coord = coordinator(store, db, tmp_path / "ctx")
    sid = _session(db)
    coord.on_idle(sid, force=True)
    capsys.readouterr()
    code = main(["--db", str(tmp_path / "memory.db"), "search", "eviction", "--json"])
    out = capsys.readouterr().out
    assert code == 0
    rows = json.loads(out)
    rows = rows if isinstance(rows, list) else rows["results"]
    ep = next(r for r in rows if r["type"] == "conversation")
    assert ep["session_id"] == sid and ep["time"] == ep["created_at"]
    db.close()


def test_retention_and_cap_prune_the_oldest(store: MemoryStore) -> None:
    from llmem_hooks.store.episodes import episode_stats, prune_episodes

    days = ["2020-01-01", "2026-01-01", "2026-02-01", "2026-03-01"]
    for i, day in enumerate(days):
        store.add(
            "conversation",
            f"User: exchange {i}",
            source="episode",
            session_id="s1",
            created_at=f"{day}T00:00:00+00:00",
            dedupe=False,
        )
    store.add("fact", "kept: not an episode", created_at="2019-01-01T00:00:00+00:00")
    assert episode_stats(store.db)["count"] == 4
    assert prune_episodes(store, retention_days=365 * 3, max_count=0) == 1  # 2020 goes
    assert prune_episodes(store, retention_days=0, max_count=2) == 1  # then the oldest
    left = [m["content"] for m in episodes_of(store)]
    assert left == ["User: exchange 2", "User: exchange 3"]
    assert store.count() == 3
    stats = episode_stats(store.db)
    assert stats["count"] == 2 and stats["sessions"] == 1 and stats["bytes_per_episode"] > 0


def test_stats_shows_episodes(store: MemoryStore, tmp_path: Path, capsys) -> None:
    from llmem_hooks.cli import main

    store.add("conversation", "User: hi", source="episode", session_id="s1", dedupe=False)
    capsys.readouterr()
    assert main(["--db", str(tmp_path / "memory.db"), "stats"]) == 0
    out = capsys.readouterr().out
    assert "episodes: 1 exchange from 1 session" in out and "kept 365 days" in out
    assert main(["--db", str(tmp_path / "memory.db"), "stats", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["episodes"]["count"] == 1


def test_a_copilot_session_through_the_coordinator(store: MemoryStore, tmp_path: Path) -> None:
    from support.copilot_home import CopilotHome

    from llmem_hooks.adapters import CopilotAdapter

    home = CopilotHome(tmp_path / "copilot")
    s = home.session()
    s.user("Why does the login test fail on CI?")
    _, calls = s.assistant(
        "Checking the fixtures.",
        [("bash", {"command": "pytest tests/test_login.py"})],
        reasoning="Probably the seed.",
    )
    s.tool_run(calls[0], "bash", {"command": "pytest tests/test_login.py"}, success=False)
    s.assistant("The Redis seed is missing on CI; add it to the workflow.")
    coord = SessionHookCoordinator(
        store, {"copilot": CopilotAdapter(home.root)}, config(), tmp_path / "ctx"
    )
    coord.on_idle(s.id, force=True)
    (ep,) = episodes_of(store)
    assert ep["entered_by"] == "copilot" and ep["session_id"] == s.id
    assert "[bash] pytest tests/test_login.py (failed)" in ep["content"]
    assert "Redis seed" in ep["content"] and "Probably the seed" not in ep["content"]


def test_a_lost_cursor_never_duplicates_an_episode(store: MemoryStore, tmp_path: Path) -> None:
    db = OpenCodeDB(tmp_path / "oc" / "opencode.db")
    coord = coordinator(store, db, tmp_path / "ctx")
    sid = _session(db)
    coord.on_idle(sid, force=True)
    store.conn.execute("DELETE FROM extraction_log WHERE source_id = ?", (sid,))
    coord.on_idle(sid, force=True)
    assert len(episodes_of(store)) == 2
    db.close()


class HashEmbedder:
    """A stand-in for the embedding model (bag-of-words hash vectors)."""

    def embed(self, text: str) -> list[float]:
        from support.fake_ollama import embed_text

        return embed_text(text, 64)

    def embed_batch(self, texts: list[str]) -> list[list[float]]:
        return [self.embed(t) for t in texts]

    def backoff_remaining(self) -> float:
        return 0.0


def test_with_a_model_episodes_get_vectors_when_stored_but_not_in_the_backfill(
    store: MemoryStore, tmp_path: Path
) -> None:
    db = OpenCodeDB(tmp_path / "oc" / "opencode.db")
    adapter = OpenCodeAdapter(db.path)
    coord = SessionHookCoordinator(
        store, {"opencode": adapter}, config(), tmp_path / "ctx", embedder=HashEmbedder()
    )
    sid = _session(db)
    coord.on_idle(sid, force=True)
    eps = episodes_of(store)
    assert len(eps) == 2
    assert store.missing_embeddings(100) == []  # stored with their vectors
    hits = Retriever(store, embedder=HashEmbedder()).find(
        "eviction policy", search_mode="semantic", track_access=False
    )
    assert {e["id"] for e in eps} <= {h.id for h in hits}  # semantic search sees them
    other = _session(db)  # a past session indexed by the one-time backfill: no model calls
    store.conn.execute("DELETE FROM extraction_log WHERE source_type LIKE '%episodes%'")
    coord.backfill_episodes()
    missing = {mid for mid, _ in store.missing_embeddings(100)}
    assert missing == {e["id"] for e in episodes_of(store) if e["session_id"] == other}
    assert coord.backfill_embeddings() == 2 and store.missing_embeddings(100) == []
    db.close()
