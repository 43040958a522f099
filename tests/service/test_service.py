"""The query service's operations, in process (docs/query-service.md): recall and its
floor, budget and per-session memory; search, remember, forget, get, timeline, status;
and the recall block never learned back through an adapter."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.opencode_db import OpenCodeDB, text

from llmem_hooks import MemoryStore, SessionHookCoordinator
from llmem_hooks.adapters import OpenCodeAdapter
from llmem_hooks.config import DEFAULT_CONFIG
from llmem_hooks.extraction.transcript import strip_injected
from llmem_hooks.service.operations import QueryService, ServiceError
from llmem_hooks.service.prompts import prompt_words
from llmem_hooks.session.context import build_session_context, context_path
from llmem_hooks.store import recall as given

NO_MODEL = {"ollama": {"enabled": False}}


@pytest.fixture
def svc(store: MemoryStore) -> Iterator[QueryService]:
    with QueryService(store, NO_MODEL) as service:
        yield service


def _fact(svc: QueryService, content: str, **kw: object) -> str:
    out = svc.remember(content, **kw)  # type: ignore[arg-type]
    assert out["status"] == "stored", out
    return str(out["id"])


def test_small_talk_gets_nothing_and_a_real_question_gets_its_fact(svc: QueryService) -> None:
    fid = _fact(svc, "The staging database is restored nightly from the prod snapshot at 02:00")
    _fact(svc, "Continue using pnpm, never npm, in the web workspace")  # holds "continue"
    _fact(svc, "Thanks to the cache the dashboard loads in 300 ms")  # holds "thanks"
    for prompt in ("hi", "continue", "thanks", "Thanks!", "ok, continue please", "yes go ahead"):
        out = svc.recall("ses_a", prompt)
        assert out["block"] == "" and out["ids"] == [] and out["reason"] == "below_floor", prompt
    out = svc.recall("ses_a", "when is the staging database restored?")
    assert out["ids"] == [fid]
    assert out["block"].startswith("<llmem-recall>\n") and out["block"].endswith("</llmem-recall>")
    line = next(ln for ln in out["block"].splitlines() if ln.startswith("- "))
    assert line.startswith(f"- [{fid}] (fact, ")
    assert "restored nightly" in line


def test_one_rare_word_is_enough_one_common_word_is_not(svc: QueryService) -> None:
    rare = _fact(svc, "Grafana dashboards live in ops/grafana, provisioned by terraform")
    for i in range(12):
        _fact(svc, f"Service number {i} logs to stdout in json format {i * 7}")
    assert prompt_words("grafana?") == ["grafana"]
    assert svc.recall("ses_r", "grafana?")["ids"] == [rare]
    assert svc.recall("ses_r2", "logs?")["reason"] == "below_floor"  # in 12 of 13 memories


def test_a_hit_must_cover_enough_of_the_prompt(svc: QueryService) -> None:
    _fact(svc, "The billing service retries webhooks three times")
    # one word of four in common: the search finds it, the floor drops it
    out = svc.recall("ses_c", "how should billing invoices be rendered as pdf files?")
    assert out["block"] == "" and out["reason"] in ("below_floor", "no_match")


def test_no_repeats_within_a_session_repeats_across_sessions(
    svc: QueryService, store: MemoryStore
) -> None:
    fid = _fact(svc, "Releases are tagged vX.Y.Z and built by the release workflow")
    first = svc.recall("ses_1", "how are releases tagged?")
    assert first["ids"] == [fid]
    again = svc.recall("ses_1", "releases tagged how exactly?")
    assert again["ids"] == [] and again["block"] == ""
    other = svc.recall("ses_2", "how are releases tagged?")
    assert other["ids"] == [fid]
    # kept in the store: a new service (a restarted sidecar, the in-process fallback) agrees
    assert given.given_ids(store.db, "ses_1") == {first["memory_ids"][0]}
    with QueryService(store, NO_MODEL) as fresh:
        assert fresh.recall("ses_1", "how are releases tagged?")["ids"] == []


def test_budget_is_respected(svc: QueryService) -> None:
    for i in range(30):
        _fact(svc, f"Kafka consumer group {i} reads the orders topic with batch size {i * 10}")
    # (words in every memory say nothing on their own: the batch size picks the topic)
    out = svc.recall("ses_b", "which kafka consumer group reads the orders topic, batch 50?")
    assert 1 <= len(out["ids"]) <= DEFAULT_CONFIG["recall"]["max_results"]
    assert out["tokens"] <= 400 and len(out["block"]) <= 400 * 4
    small = svc.recall("ses_b2", "kafka consumer group orders topic batch 50", budget_tokens=60)
    assert len(small["ids"]) == 1 and len(small["block"]) <= 60 * 4
    assert svc.recall("ses_b3", "kafka consumer orders", budget_tokens=0)["reason"] == "disabled"


def test_short_ids_resolve_through_get(svc: QueryService, store: MemoryStore) -> None:
    fid = _fact(svc, "Feature flags are read from LaunchDarkly at start-up", tags=["flags"])
    out = svc.recall("ses_g", "where are feature flags read from?")
    assert out["ids"] == [fid] and len(fid) == 8
    got = svc.get(out["ids"])
    mem = got["memories"][0]
    assert mem["full_id"] == store.resolve_id(fid) and mem["content"].startswith("Feature flags")
    assert mem["tags"] == ["flags"] and mem["agent"] == "agent" and mem["valid"] is True
    missing = svc.get(["zzzzzzzz", fid])
    assert [m["id"] for m in missing["memories"]] == [fid]
    assert missing["missing"][0]["id"] == "zzzzzzzz"


def test_remember_redacts_dedupes_and_rejects(svc: QueryService, store: MemoryStore) -> None:
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    out = svc.remember(f"The deploy bot token is {secret} (rotate monthly)", type="fact")
    assert out["status"] == "stored" and out["redacted"]
    stored = store.get(store.resolve_id(out["id"]))
    assert stored is not None and secret not in stored["content"]
    assert "[REDACTED]" in stored["content"]
    again = svc.remember(f"The deploy bot token is {secret} (rotate monthly)", type="fact")
    assert again == {**out, "status": "duplicate"}
    bad = svc.remember("x" * 20_000)
    assert bad["status"] == "rejected" and bad["id"] is None and "10,000" in bad["reason"]
    with pytest.raises(ServiceError) as err:
        svc.call("remember", {"content": "fine", "tags": [1, 2]})
    assert err.value.code == "bad_params"


def test_remember_is_project_scoped(svc: QueryService, tmp_path: Path) -> None:
    a = _fact(svc, "Project alpha deploys with helm charts from deploy/helm", project="p-alpha")
    g = _fact(svc, "Every project deploys through the shared helm registry")
    assert svc.recall("s1", "how do we deploy with helm?", project="p-beta")["ids"] == [g]
    assert set(svc.recall("s2", "how do we deploy with helm?", project="p-alpha")["ids"]) == {
        a,
        g,
    }
    assert svc.search("helm deploy", project="p-beta")["results"][0]["id"] == g
    # a directory outside git is its own project key
    folder = tmp_path / "work"
    folder.mkdir()
    d = _fact(svc, "This folder deploys helm charts by hand", directory=str(folder))
    found = {r["id"] for r in svc.search("helm charts", directory=str(folder))["results"]}
    assert d in found and a not in found


def test_forget(svc: QueryService) -> None:
    fid = _fact(svc, "The CI cache key includes the lockfile hash")
    assert svc.forget(fid, "we dropped the cache")["status"] == "forgotten"
    assert svc.forget(fid, "again")["status"] == "already_forgotten"
    assert svc.search("CI cache lockfile")["results"] == []
    assert svc.get(fid)["memories"][0]["valid"] is False
    with pytest.raises(ServiceError) as err:
        svc.call("forget", {"id": "ffffffff", "reason": "x"})
    assert err.value.code == "not_found"
    with pytest.raises(ServiceError) as err:
        svc.call("forget", {"id": fid})
    assert err.value.code == "bad_params"


def test_search_lines_are_compact(svc: QueryService) -> None:
    _fact(svc, "Postgres vacuum runs weekly; " + "details " * 200)
    res = svc.search("postgres vacuum weekly", limit=3)["results"]
    assert len(res) == 1 and set(res[0]) == {
        "id",
        "type",
        "line",
        "session_id",
        "created_at",
        "project",
        "project_name",
        "score",
    }
    assert len(res[0]["line"]) <= 160 and "\n" not in res[0]["line"]


def test_timeline_shows_the_session_around_a_memory(store: MemoryStore, svc: QueryService) -> None:
    ids = []
    for i in range(7):
        ids.append(
            store.add(
                "conversation",
                f"User: step {i} of the migration\nAssistant: done with step {i}",
                source="episode",
                metadata={"episode": True},
                session_id="ses_t",
                created_at=f"2026-03-0{i + 1}T10:00:00Z",
                dedupe=False,
            )
        )
    store.add("fact", "Unrelated fact in another session", session_id="ses_other")
    out = svc.timeline(ids[3][:8], before=2, after=2)
    assert out["session_id"] == "ses_t"
    assert [i["line"].split(" of")[0] for i in out["items"]] == [
        f"User: step {n}" for n in (1, 2, 3, 4, 5)
    ]
    assert [i["anchor"] for i in out["items"]] == [False, False, True, False, False]
    assert out["items"][0]["type"] == "conversation"


def test_status_and_dispatch_errors(svc: QueryService) -> None:
    st = svc.status()
    assert st["protocol"] == 1 and st["served_by"] == "in-process" and st["memories"] == 0
    for method, params, code in (
        ("nope", {}, "unknown_method"),
        ("search", {"query": "x", "colour": "red"}, "bad_params"),
        ("search", {"query": 3}, "bad_params"),
        ("search", {"query": "x", "limit": 10_000}, "bad_params"),
        ("recall", {"prompt": "x"}, "bad_params"),
        ("get", {"ids": []}, "bad_params"),
        ("search", [1, 2], "bad_params"),
    ):
        with pytest.raises(ServiceError) as err:
            svc.call(method, params)  # type: ignore[arg-type]
        assert err.value.code == code, (method, params)


def test_an_old_fact_behind_400_recent_distractors_is_recalled(
    store: MemoryStore, svc: QueryService
) -> None:
    """The start-of-session context (type, confidence, recency within 1,500 tokens) never
    reaches the old fact; recall on the prompt that asks for it does."""
    old = store.add(
        "fact",
        "The license server for the CAD plugin runs on port 27000 on lic01",
        project="p",
        created_at="2024-02-01T09:00:00Z",
        confidence=0.6,
    )
    for i in range(400):
        store.add(
            "preference" if i % 2 else "decision",
            f"Recent choice {i}: format module {i} with black and sort imports in block {i}",
            project="p",
            confidence=0.9,
        )
    start = build_session_context(store, "p", 1500)
    assert "27000" not in start and "Recent choice" in start
    out = svc.recall("ses_old", "which port does the CAD license server use?", project="p")
    assert out["memory_ids"] == [old] and "27000" in out["block"]


def test_what_the_start_context_gave_is_not_recalled(svc: QueryService, tmp_path: Path) -> None:
    """What `start` gives a session is recorded as given, by memory id: recall leaves it
    out for that session (a long entry the context cuts too), and only for that one."""
    shown = _fact(svc, "Docker images are pushed to ghcr.io/acme by the release job")
    long = _fact(
        svc,
        "The nightly backup job copies the billing database to cold storage "
        + "and then verifies every archived table checksum twice " * 8,
    )
    start = svc.start("ses_ctx")["context"]
    assert "ghcr.io/acme" in start and "..." in start
    assert svc.recall("ses_ctx", "where are docker images pushed?")["ids"] == []
    assert svc.recall("ses_ctx", "how does the nightly backup job work?")["ids"] == []
    assert svc.recall("ses_new", "where are docker images pushed?")["ids"] == [shown]
    assert svc.recall("ses_other", "how does the nightly backup job work?")["ids"] == [long]


def test_what_the_coordinators_context_file_gave_is_not_recalled(svc: QueryService) -> None:
    """The sidecar's `on_created` records what the file gives the same way."""
    from llmem_hooks.session.hooks import SessionHookCoordinator

    shown = _fact(svc, "Docker images are pushed to ghcr.io/acme by the release job")
    coord = SessionHookCoordinator(
        svc.store, adapters={}, config={"context": {"dir": str(svc.context_dir)}}
    )
    assert coord.on_created("ses_file")[0] == "success"
    assert "ghcr.io/acme" in context_path("ses_file", svc.context_dir).read_text()
    assert svc.recall("ses_file", "where are docker images pushed?")["ids"] == []
    assert svc.recall("ses_else", "where are docker images pushed?")["ids"] == [shown]


def test_strip_injected() -> None:
    block = "<llmem-recall>\n- [abcd1234] (fact, 2026-01-01) x\n</llmem-recall>"
    assert strip_injected(f"before {block} after") == "before  after"
    assert strip_injected(f"{block}\nreal prompt") == "\nreal prompt"
    clipped = "<llmem-recall>\n- [abcd1234] (fact, 2026-01-01) x\n- [ab"
    assert strip_injected(f"keep {clipped}") == "keep "
    # A marker in the user's own words is no block of ours: nothing of theirs is dropped.
    for own in ("keep <llmem-recall> unclosed tail", "clipped head </llmem-recall> rest"):
        assert strip_injected(own) == own
    assert strip_injected("no marker") == "no marker"


def _coordinator(store: MemoryStore, db: OpenCodeDB, ctx: Path) -> SessionHookCoordinator:
    cfg = {k: dict(v) for k, v in DEFAULT_CONFIG.items()}
    cfg["ollama"]["enabled"] = False
    cfg["session"].update(idle_quiet_seconds=0, idle_debounce_seconds=0)
    return SessionHookCoordinator(store, {"opencode": OpenCodeAdapter(db.path)}, cfg, ctx)


def test_a_recalled_block_is_never_learned_back(
    store: MemoryStore, svc: QueryService, tmp_path: Path
) -> None:
    """The feedback loop: a recall block inside a user message goes through the adapter,
    extraction and episode indexing, and nothing of it comes back as a memory. The same
    sentence without our markers IS learned (so the check could fail)."""
    fact = "We decided to always ship the api with make ship-it-now"
    store.add("decision", fact, created_at="2025-01-01T00:00:00Z")
    block = svc.recall("ses_x", "how do we ship the api?")["block"]
    assert "ship-it-now" in block
    db = OpenCodeDB(tmp_path / "oc" / "opencode.db")
    coord = _coordinator(store, db, tmp_path / "ctx")
    looped = db.session("Loop")
    u1 = db.user(looped, f"{block}\nHow do we ship the api to staging this week?")
    db.assistant(looped, u1, text("I will run the staging pipeline for the api."))
    coord.on_idle(looped, force=True)
    learned = store.list_all(limit=1000, session_id=looped)
    assert learned, "the exchange itself is stored as an episode"
    for mem in learned:
        assert "ship-it-now" not in mem["content"] and "llmem-recall" not in mem["content"]
    episode = next(m for m in learned if m["type"] == "conversation")
    assert "ship the api to staging" in episode["content"]
    control = db.session("Control")
    u2 = db.user(control, "We decided to always ship the api with make ship-it-now-two")
    db.assistant(control, u2, text("Noted."))
    coord.on_idle(control, force=True)
    said = [m["content"] for m in store.list_all(limit=1000, session_id=control)]
    assert any("ship-it-now-two" in c for c in said)
    db.close()
    for adapter in coord.adapters.values():
        adapter.close()


def test_a_long_episode_shows_the_lines_that_answer(tmp_path: Path) -> None:
    """Recall and search cut a long episode to the lines holding the prompt's words, not
    to its opening."""
    filler = "\n".join(f"Line {i}: we looked at the logs and nothing stood out." for i in range(40))
    content = (
        "User: the upload job keeps failing\nAssistant: "
        + filler
        + "\nThe fix: raise the multipart chunk size to 16 MiB in uploader.toml."
    )
    with MemoryStore(tmp_path / "m.db") as store:
        store.add("conversation", content, dedupe=False)
        svc = QueryService(store)
        res = svc.search("multipart chunk size")["results"]
        assert res and "16 MiB" in res[0]["line"]


def test_the_start_context_is_built_once_until_the_store_changes(tmp_path: Path) -> None:
    """Every session of a project starts with the same text until a memory changes: a
    service with its own store builds it once (Copilot feels every millisecond of CPU
    at its start) and builds it again after a commit of any other connection or process,
    or a write of its own; what each session was given is recorded all the same."""
    import llmem_hooks.service.operations as ops

    db = tmp_path / "memory.db"
    cfg = {**NO_MODEL, "memory": {"db_path": str(db)}, "context": {"dir": str(tmp_path / "c")}}
    with MemoryStore(db) as other:
        other.add("decision", "Deploys go through the blue-green pipeline", project="p1")
    builds: list[str | None] = []
    real = ops.session_context

    def counting(store: MemoryStore, scope: str | None, *a: object, **k: object):
        builds.append(scope)
        return real(store, scope, *a, **k)  # type: ignore[arg-type]

    ops.session_context = counting  # type: ignore[assignment]
    try:
        with QueryService.open(cfg) as svc:
            first = svc.start("ses_1", project="p1")["context"]
            assert "blue-green" in first
            assert svc.start("ses_2", project="p1")["context"] == first
            assert builds == ["p1"]
            assert given.given_ids(svc.store.db, "ses_2")  # recorded for each session
            with MemoryStore(db) as other:  # another process commits
                other.add("preference", "Use pnpm, never npm, in the web workspace", project="p1")
            assert "pnpm" in svc.start("ses_3", project="p1")["context"]
            mid = svc.remember("The API listens on port 8443", type="decision", project="p1")["id"]
            assert "8443" in svc.start("ses_4", project="p1")["context"]  # its own write
            svc.forget(mid, "moved", project="p1")
            assert "8443" not in svc.start("ses_5", project="p1")["context"]
            assert builds == ["p1"] * 4
    finally:
        ops.session_context = real  # type: ignore[assignment]
