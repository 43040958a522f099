"""Extraction with the local model, against the real fake Ollama server on 127.0.0.1:
typed memories, retry-once on malformed answers, graceful fallback to the heuristics,
back-off, safety of what is sent, chunking, and the coordinator end to end."""

from __future__ import annotations

import copy
import json
import logging
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.opencode_db import PROJECT, OpenCodeDB, text

from llmem_hooks import MemoryStore, Message, create_session_hook_coordinator
from llmem_hooks.adapters import OpenCodeAdapter
from llmem_hooks.config import DEFAULT_CONFIG
from llmem_hooks.extraction.engine import ExtractionEngine
from llmem_hooks.extraction.llm import (
    CUT_MARK,
    OllamaExtractor,
    build_extraction_engine,
    chunk_messages,
    extractable_types,
    render_message,
)
from llmem_hooks.model.budget import estimate_tokens

GITHUB_TOKEN = "ghp_" + "Zq8" * 12
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
LEARNED = "Pin tzdata to 2024a in requirements-dev.txt to fix the flaky date test"


def config(url: str, **ollama: Any) -> dict[str, Any]:
    cfg = copy.deepcopy(DEFAULT_CONFIG)
    cfg["ollama"].update({"base_url": url, "timeout_seconds": 5.0, **ollama})
    cfg["session"].update(idle_debounce_seconds=0)
    cfg["episodes"]["enabled"] = False  # model extraction here; episodes: test_episodes.py
    return cfg


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def memory(content: str = LEARNED, **fields: Any) -> dict[str, Any]:
    item = {
        "type": "procedure",
        "content": content,
        "confidence": 0.9,
        "tags": ["tests", "tzdata"],
        "scope": "project",
        "source_message_ids": [],
    }
    item.update(fields)
    return item


def responder(
    memories: Callable[[dict[str, Any]], list[dict[str, Any]]] | list[dict[str, Any]],
    assessment: dict[str, Any] | None = None,
) -> Callable[[dict[str, Any]], str]:
    """Answers extraction requests with ``memories`` and self-assessment requests with
    ``assessment`` (told apart by the schema they send)."""

    def answer(body: dict[str, Any]) -> str:
        props = (body.get("format") or {}).get("properties", {})
        if "memories" in props:
            mems = memories(body) if callable(memories) else memories
            return json.dumps({"memories": mems})
        return json.dumps(assessment or {})

    return answer


def msg(i: int, role: str, words: str, sid: str = "ses_x") -> Message:
    prefix = "User" if role == "user" else "Assistant"
    return Message(f"msg_{i:04d}", sid, role, f"{prefix}: {words}")  # type: ignore[arg-type]


def prompts(srv: Any) -> list[str]:
    return [b["prompt"] for b in srv.control.bodies("/api/generate")]


@pytest.fixture
def engine_for(store: MemoryStore) -> Callable[..., ExtractionEngine]:
    def make(url: str, **kw: Any) -> ExtractionEngine:
        ollama = {k: v for k, v in kw.items() if k in DEFAULT_CONFIG["ollama"]}
        rest = {k: v for k, v in kw.items() if k not in ollama}
        return build_extraction_engine(config(url, **ollama), store, **rest)

    return make


# -- the happy path -----------------------------------------------------------------------
def test_model_memories_come_back_typed_and_validated(
    fake_ollama: tuple[Any, str], engine_for: Callable[..., ExtractionEngine]
) -> None:
    srv, url = fake_ollama
    srv.control.responder = responder(
        lambda body: [
            memory(source_message_ids=["msg_0001", "not-a-message"]),
            memory(
                "The user prefers ruff over flake8 for linting",
                type="preference",
                scope="global",
                confidence=0.8,
                tags=["lint"],
            ),
            memory("Just chatting about the weather today", confidence=0.2),  # too unsure
        ]
    )
    engine = engine_for(url)
    msgs = [
        msg(0, "user", "why does the date test fail?"),
        msg(1, "assistant", "It passes after pinning tzdata to 2024a in requirements-dev.txt."),
        msg(2, "user", "remember that we use ruff, never flake8"),
    ]
    found = engine.extract(msgs, project="proj")
    assert engine.last_run.startswith("ollama: 1 chunk")
    by_content = {c.content: c for c in found}
    pinned = by_content[LEARNED]
    assert pinned.type == "procedure" and pinned.scope == "project"
    assert pinned.confidence == 0.9 and pinned.source_message_ids == ["msg_0001"]
    assert {"tests", "tzdata", "procedure"} <= set(pinned.tags)
    pref = by_content["The user prefers ruff over flake8 for linting"]
    assert pref.scope == "global" and pref.type == "preference"
    assert pref.source_message_ids == ["msg_0000", "msg_0001", "msg_0002"]  # none cited: all
    assert not any("weather" in c for c in by_content)
    # The heuristics' explicit "remember that" hit is never lost.
    assert "We use ruff, never flake8." in by_content

    (body,) = srv.control.bodies("/api/generate")
    assert body["stream"] is False and body["model"] == "llama3.2"
    assert body["options"]["num_ctx"] == DEFAULT_CONFIG["ollama"]["context_tokens"]
    item = body["format"]["properties"]["memories"]["items"]
    assert item["properties"]["type"]["enum"] == extractable_types()
    assert "self_assessment" not in extractable_types()
    for wanted in ("decisions", "commands", "errors", "preferences", "chit-chat"):
        assert wanted in body["system"]
    assert "[msg_0001] Assistant: It passes after pinning tzdata" in body["prompt"]


def test_the_fake_servers_default_answer_is_accepted(
    fake_ollama: tuple[Any, str], engine_for: Callable[..., ExtractionEngine]
) -> None:
    """Without a responder the fake answers a minimal instance of the schema."""
    _, url = fake_ollama
    engine = engine_for(url)
    engine.extract([msg(0, "user", "We moved the API to port 8080 last week")], project=None)
    assert engine.last_run.startswith("ollama:")


# -- malformed answers --------------------------------------------------------------------
def test_malformed_answer_twice_drops_the_chunk_with_a_log_line(
    fake_ollama: tuple[Any, str],
    engine_for: Callable[..., ExtractionEngine],
    caplog: pytest.LogCaptureFixture,
) -> None:
    srv, url = fake_ollama
    srv.control.generate_queue[:] = ["not json", "not json"]
    srv.control.responder = responder([memory()])  # would be used by a third request
    engine = engine_for(url)
    with caplog.at_level(logging.WARNING, logger="llmem_hooks"):
        found = engine.extract([msg(0, "user", "remember that builds run on arm64")], project=None)
    assert len(srv.control.bodies("/api/generate")) == 2  # asked once more, then dropped
    assert [c.content for c in found] == ["Builds run on arm64."]  # the heuristics' hit
    assert "dropped (malformed answer)" in engine.last_run
    assert any("dropped" in r.getMessage() for r in caplog.records)


def test_malformed_answer_once_is_retried_and_succeeds(
    fake_ollama: tuple[Any, str], engine_for: Callable[..., ExtractionEngine]
) -> None:
    srv, url = fake_ollama
    srv.control.generate_queue[:] = ["not json"]
    srv.control.responder = responder([memory()])
    engine = engine_for(url)
    found = engine.extract([msg(0, "user", "the date test is flaky")], project=None)
    assert len(srv.control.bodies("/api/generate")) == 2
    assert [c.content for c in found] == [LEARNED]
    assert "dropped" not in engine.last_run


@pytest.mark.parametrize(
    "bad",
    [
        json.dumps([memory()]),  # a list, not the object
        json.dumps({"memories": "none"}),  # wrong type of the list
        json.dumps({"memories": [{"type": "fact", "content": 5, "confidence": 0.9}]}),
        json.dumps({"memories": [memory(type="hunch")]}),  # not a registered type
        json.dumps({"memories": [memory(confidence="high")]}),
        json.dumps({"memories": [memory(confidence=7)]}),
        json.dumps({"memories": [memory(scope="everywhere")]}),
        json.dumps({"memories": [memory(tags="a,b")]}),
    ],
)
def test_wrong_shapes_and_types_count_as_malformed(
    fake_ollama: tuple[Any, str], engine_for: Callable[..., ExtractionEngine], bad: str
) -> None:
    srv, url = fake_ollama
    srv.control.generate_queue[:] = [bad]
    srv.control.responder = responder([memory()])
    engine = engine_for(url)
    found = engine.extract([msg(0, "user", "the date test is flaky")], project=None)
    assert len(srv.control.bodies("/api/generate")) == 2
    assert [c.content for c in found] == [LEARNED]


def test_one_bad_item_is_skipped_without_asking_again(
    fake_ollama: tuple[Any, str], engine_for: Callable[..., ExtractionEngine]
) -> None:
    srv, url = fake_ollama
    srv.control.responder = responder([memory(), memory("Broken", confidence=None)])
    engine = engine_for(url)
    found = engine.extract([msg(0, "user", "the date test is flaky")], project=None)
    assert len(srv.control.bodies("/api/generate")) == 1
    assert [c.content for c in found] == [LEARNED]


def test_an_empty_answer_is_valid(
    fake_ollama: tuple[Any, str], engine_for: Callable[..., ExtractionEngine]
) -> None:
    srv, url = fake_ollama
    srv.control.responder = responder([])
    engine = engine_for(url)
    assert engine.extract([msg(0, "user", "hi there, how are you")], project=None) == []
    assert len(srv.control.bodies("/api/generate")) == 1
    assert engine.last_run.startswith("ollama:")


# -- graceful degradation -----------------------------------------------------------------
REMEMBER = [msg(0, "user", "remember that builds run on arm64 runners")]


def test_timeout_falls_back_to_the_heuristics_and_backs_off(
    fake_ollama: tuple[Any, str], engine_for: Callable[..., ExtractionEngine]
) -> None:
    srv, url = fake_ollama
    srv.control.delay_ms = 1000
    now = [1000.0]
    engine = engine_for(url, timeout_seconds=0.2, monotonic=lambda: now[0])
    found = engine.extract(REMEMBER, project=None)
    assert [c.content for c in found] == ["Builds run on arm64 runners."]
    assert engine.last_run.startswith("heuristic:") and "no answer in time" in engine.last_run
    # The next idle event does not wait on the dead model again...
    engine.extract(REMEMBER, project=None)
    assert len(srv.control.bodies("/api/generate")) == 1
    assert "retrying in" in engine.last_run
    # ...until the back-off period is over.
    srv.control.delay_ms = 0
    now[0] += 61
    engine.extract(REMEMBER, project=None)
    assert len(srv.control.bodies("/api/generate")) == 2
    assert engine.last_run.startswith("ollama:")


def test_missing_model_falls_back(
    fake_ollama: tuple[Any, str], engine_for: Callable[..., ExtractionEngine]
) -> None:
    _, url = fake_ollama
    engine = engine_for(url, model="no-such-model")
    found = engine.extract(REMEMBER, project=None)
    assert [c.content for c in found] == ["Builds run on arm64 runners."]
    assert engine.last_run == f"heuristic: model 'no-such-model' not found on {url}"


@pytest.mark.parametrize("status", [500, 503])
def test_server_errors_fall_back(
    fake_ollama: tuple[Any, str], engine_for: Callable[..., ExtractionEngine], status: int
) -> None:
    srv, url = fake_ollama
    srv.control.status = status
    engine = engine_for(url)
    assert [c.content for c in engine.extract(REMEMBER, project=None)] == [
        "Builds run on arm64 runners."
    ]
    assert f"HTTP {status}" in engine.last_run


def test_connection_refused_falls_back_and_does_not_hammer(
    engine_for: Callable[..., ExtractionEngine],
) -> None:
    now = [0.0]
    engine = engine_for(closed_port_url(), monotonic=lambda: now[0])
    engine.extract(REMEMBER, project=None)
    assert "cannot connect" in engine.last_run and "retrying" not in engine.last_run
    now[0] += 30
    engine.extract(REMEMBER, project=None)
    assert "retrying in 30 s" in engine.last_run  # skipped without a connection attempt
    now[0] += 31
    engine.extract(REMEMBER, project=None)
    assert "retrying" not in engine.last_run  # tried again


def test_a_redirect_is_refused(
    fake_ollama: tuple[Any, str], engine_for: Callable[..., ExtractionEngine]
) -> None:
    from support.fake_ollama import start_server

    srv, url = fake_ollama
    other, other_url = start_server()
    try:
        srv.control.redirect_to = other_url + "/api/generate"
        engine = engine_for(url)
        found = engine.extract(REMEMBER, project=None)
        assert [c.content for c in found] == ["Builds run on arm64 runners."]
        assert "redirect" in engine.last_run and "refused" in engine.last_run
        assert other.control.requests == []
    finally:
        other.shutdown()
        other.server_close()


def test_bad_or_remote_base_url_never_crashes(store: MemoryStore) -> None:
    cfg = config("http://203.0.113.7:11434")
    engine = build_extraction_engine(cfg, store)
    assert not engine.uses_model
    engine.extract(REMEMBER, project=None)
    assert engine.last_run.startswith("heuristic: ollama.base_url") and "allow_remote" in (
        engine.last_run
    )
    coord = create_session_hook_coordinator(cfg, store, adapters={})
    assert coord.extractor.last_run == ""  # built, nothing ran yet


def test_disabled_means_heuristics(store: MemoryStore, fake_ollama: tuple[Any, str]) -> None:
    srv, url = fake_ollama
    engine = build_extraction_engine(config(url, enabled=False), store)
    engine.extract(REMEMBER, project=None)
    assert engine.last_run == "heuristic: ollama.enabled is false"
    assert srv.control.requests == []


# -- what the model sees ------------------------------------------------------------------
def test_secrets_and_private_spans_never_reach_the_model(
    fake_ollama: tuple[Any, str], engine_for: Callable[..., ExtractionEngine], store: MemoryStore
) -> None:
    srv, url = fake_ollama
    srv.control.responder = responder([memory()])
    engine = engine_for(url)
    msgs = [
        msg(0, "user", f"my token is {GITHUB_TOKEN} and the aws key {AWS_KEY}"),
        msg(1, "user", "db at postgres://admin:Sup3rS3cret!@db.internal:5432/app works"),
        msg(2, "user", "keep this <private>the launch codes are 0000</private> quiet"),
        msg(3, "user", "the password is hunter2!x and that is it"),
        msg(
            4,
            "assistant",
            "Assistant: Tool: bash: env [completed]\n"
            f"GITHUB_TOKEN={GITHUB_TOKEN}\n" + "filler line\n" * 200,
        ),
    ]
    engine.extract(msgs, project=None)
    sent = json.dumps(srv.control.requests)
    for secret in (GITHUB_TOKEN, AWS_KEY, "Sup3rS3cret", "launch codes", "hunter2"):
        assert secret not in sent
    assert "[REDACTED]" in sent


def test_tool_output_is_truncated_and_reasoning_left_out() -> None:
    m = Message(
        "msg_1",
        "s",
        "assistant",
        "Assistant: Reasoning: I think deeply about it\n"
        "Assistant: Tool: bash: pytest -q [error]\n"
        + "E   AssertionError\n" * 300
        + "Assistant: Fixed it.",
    )
    rendered = render_message(m, tool_chars=200)
    assert "think deeply" not in rendered
    assert rendered.startswith("[msg_1] Assistant: Tool: bash: pytest -q [error]")
    assert CUT_MARK in rendered and len(rendered) < 400
    assert rendered.endswith("Fixed it.")


def test_transcripts_are_chunked_to_fit_the_context(
    fake_ollama: tuple[Any, str], engine_for: Callable[..., ExtractionEngine]
) -> None:
    srv, url = fake_ollama
    srv.control.responder = responder([])
    engine = engine_for(url, context_tokens=1024)
    msgs = [
        msg(i, "user" if i % 2 == 0 else "assistant", f"message number {i} " + "word " * 60)
        for i in range(40)
    ]
    engine.extract(msgs, project=None)
    bodies = srv.control.bodies("/api/generate")
    assert len(bodies) > 3
    for body in bodies:
        total = estimate_tokens(body["system"]) + estimate_tokens(body["prompt"])
        total += estimate_tokens(json.dumps(body["format"]))
        assert total <= 1024 - 256  # room for the answer is left
    seen = "".join(b["prompt"] for b in bodies)
    for m in msgs:  # every message was sent exactly once
        assert seen.count(f"[{m.id}]") == 1
    assert engine.last_run.startswith(f"ollama: {len(bodies)} chunks")


def test_a_message_longer_than_a_chunk_is_cut() -> None:
    chunks = chunk_messages([msg(0, "user", "x" * 5000), msg(1, "user", "short one")], 1000)
    assert len(chunks) == 2 and len(chunks[0].text) <= 1000
    assert chunks[0].message_ids == ("msg_0000",) and chunks[1].message_ids == ("msg_0001",)


def test_a_later_failure_keeps_earlier_chunks(
    fake_ollama: tuple[Any, str], store: MemoryStore
) -> None:
    """The first chunk's memories survive when the server dies during the second."""
    srv, url = fake_ollama
    calls = []

    def answer(body: dict[str, Any]) -> str:
        calls.append(1)
        if len(calls) > 1:
            srv.control.status = 500  # every later request fails
        return json.dumps({"memories": [memory()]})

    srv.control.responder = answer
    engine = build_extraction_engine(config(url, context_tokens=1024), store)
    msgs = [msg(i, "user", f"message {i} " + "word " * 150) for i in range(12)]
    found = engine.extract(msgs, project=None)
    assert LEARNED in [c.content for c in found]
    assert "stopped early" in engine.last_run and "HTTP 500" in engine.last_run


def test_extractor_protocol_directly(fake_ollama: tuple[Any, str], store: MemoryStore) -> None:
    srv, url = fake_ollama
    srv.control.responder = responder([memory()])
    engine = build_extraction_engine(config(url), store)
    extractor = engine.extractor
    assert isinstance(extractor, OllamaExtractor) and extractor.name == "ollama"
    assert extractor.extract([], project=None) == []
    assert [c.content for c in extractor.extract([msg(0, "user", "hello")])] == [LEARNED]


# -- through the coordinator, over a real opencode.db -------------------------------------
def turn(db: OpenCodeDB, sid: str, user_text: str, reply: str) -> None:
    u = db.user(sid, user_text)
    db.assistant(sid, u, text(reply))


def coordinator_for(store: MemoryStore, db: OpenCodeDB, url: str, **ollama: Any) -> Any:
    return create_session_hook_coordinator(
        config(url, **ollama), store, adapters={"opencode": OpenCodeAdapter(db.path)}
    )


def test_coordinator_stores_model_memories_and_a_model_self_assessment(
    fake_ollama: tuple[Any, str], store: MemoryStore, tmp_path: Path
) -> None:
    srv, url = fake_ollama
    srv.control.responder = responder(
        lambda body: [memory()] if "tzdata" in body["prompt"] else [],
        {
            "category": "MISSING_VERIFICATION",
            "what_happened": "The date test was not run after pinning tzdata",
            "caught_by": "the user",
            "proposed_fix": "Run the full test suite after dependency changes",
            "outcome": "completed",
        },
    )
    db = OpenCodeDB(tmp_path / "oc" / "opencode.db")
    coord = coordinator_for(store, db, url)
    sid = db.session("Flaky test")
    turn(db, sid, "the date test is flaky, fix it", "Pinned tzdata to 2024a; the test passes.")
    assert coord.on_idle(sid) == ("success", 1)
    assert coord.extractor.last_run.startswith("ollama:")
    (mem,) = store.list_all(type="procedure")
    assert mem["content"] == LEARNED and mem["project"] == PROJECT
    assert mem["source"] == "extract" and mem["entered_by"] == "opencode"
    assert mem["session_id"] == sid and len(mem["source_message_ids"]) == 2
    assert {"tests", "tzdata"} <= set(mem["tags"])

    result, written = coord.on_ending(sid)
    assert result == "success" and written == 2
    (sa,) = store.list_all(type="self_assessment")
    assert sa["content"].startswith("MISSING_VERIFICATION: The date test was not run")
    assert "Caught by: the user." in sa["content"] and "Outcome: completed." in sa["content"]
    assert set(sa["tags"]) >= {"self-assessment", "missing-verification"}
    assert sa["metadata"]["assessed_by"] == "ollama" and sa["metadata"]["model"] == "llama3.2"
    assert coord.extractor.last_assessment == "ollama"
    usage = store.conn.execute("SELECT session_key, calls FROM model_usage").fetchall()
    assert [(r[0], r[1]) for r in usage] == [(f"opencode:{sid}", 2)]
    db.close()


def test_only_new_messages_are_sent_and_tokens_do_not_grow(
    fake_ollama: tuple[Any, str], store: MemoryStore, tmp_path: Path
) -> None:
    srv, url = fake_ollama
    srv.control.responder = responder([])
    db = OpenCodeDB(tmp_path / "oc" / "opencode.db")
    coord = coordinator_for(store, db, url)
    sid = db.session("Long session")
    key = f"opencode:{sid}"
    spent: list[int] = []
    for i in range(8):
        turn(db, sid, f"step {i}: change module_{i}.py please", f"Changed module_{i}.py.")
        before = coord.extractor.extractor.caller.budget.session_usage(key).tokens
        coord.on_idle(sid, force=True)
        spent.append(coord.extractor.extractor.caller.budget.session_usage(key).tokens - before)
    sent = prompts(srv)
    assert len(sent) == 8
    assert "module_0.py" in sent[0]
    for i in range(1, 8):  # each idle event sends its own turn only
        assert f"module_{i}.py" in sent[i] and f"module_{i - 1}.py" not in sent[i]
    assert max(spent) - min(spent) <= 10, spent  # flat, not growing with the session
    db.close()


def test_self_assessment_degrades_when_the_model_is_down(
    store: MemoryStore, tmp_path: Path
) -> None:
    db = OpenCodeDB(tmp_path / "oc" / "opencode.db")
    coord = coordinator_for(store, db, closed_port_url())
    sid = db.session("Offline")
    turn(db, sid, "remember that we deploy on Fridays never", "Noted.")
    result, written = coord.on_ending(sid)
    assert result == "success" and written == 2
    (sa,) = store.list_all(type="self_assessment")
    assert sa["content"].startswith("Session self-assessment (heuristic)")
    assert sa["tags"] == ["self-assessment"]
    assert coord.extractor.last_assessment.startswith("heuristic:")
    assert store.search("Fridays")  # the heuristics still extracted the note
    db.close()


def test_extracting_the_same_transcript_ten_times_leaves_the_same_memories(
    fake_ollama: tuple[Any, str], store: MemoryStore, tmp_path: Path
) -> None:
    """The model words its answer a little differently every run (as a sampled model
    would); near-duplicate merging (embedding cosine >= 0.92 within the project) and the
    exact-text check keep one row per piece of knowledge, reinforced instead of repeated."""
    srv, url = fake_ollama
    wordings = [
        LEARNED,
        "To fix the flaky date test, pin tzdata to 2024a in requirements-dev.txt",
        LEARNED + " for good",
        "Always pin tzdata to 2024a in requirements-dev.txt to fix the flaky date test",
        LEARNED.lower() + "s",
    ]
    runs = iter(range(100))

    def answer(body: dict[str, Any]) -> list[dict[str, Any]]:
        i = next(runs)
        return [
            memory(wordings[i % len(wordings)]),
            memory("Use pnpm, never npm, in this repository", type="preference"),
        ]

    srv.control.responder = responder(answer)
    db = OpenCodeDB(tmp_path / "oc" / "opencode.db")
    sid = db.session("Flaky test")
    turn(db, sid, "the date test is flaky, fix it", "Pinned tzdata to 2024a; the test passes.")
    coord = coordinator_for(store, db, url)
    snapshots = []
    for _ in range(10):
        # Forget that the transcript was extracted: the next idle event starts over.
        store.conn.execute("DELETE FROM extraction_log WHERE source_id = ?", (sid,))
        assert coord.on_idle(sid, force=True)[0] == "success"
        snapshots.append(sorted(m["id"] for m in store.list_all(limit=100)))
    assert all(s == snapshots[0] for s in snapshots), snapshots
    tz = [m for m in store.list_all(limit=100) if "tzdata" in m["content"].lower()]
    assert len(tz) == 1 and len(snapshots[0]) == 2
    assert store.count_embeddings() == 2
    db.close()


def test_small_talk_the_model_proposes_is_never_a_memory(
    fake_ollama: tuple[Any, str], engine_for: Callable[..., ExtractionEngine]
) -> None:
    """The heuristics never keep small talk (test_smalltalk.py); neither does the model's
    path: a social sentence it calls a procedure or a fact is dropped, the rest kept."""
    srv, url = fake_ollama
    srv.control.responder = responder(
        [
            memory(),
            memory("Always here to help.", type="procedure", confidence=0.9),
            memory("You're worth it too!", type="fact", confidence=0.8),
            memory("Thanks so much, you're a lifesaver", type="preference", confidence=0.7),
        ]
    )
    engine = engine_for(url)
    found = engine.extract([msg(0, "user", "the date test is flaky, thanks!")], project=None)
    assert [c.content for c in found] == [LEARNED]
    assert len(srv.control.bodies("/api/generate")) == 1  # a valid answer, not asked again
