"""The dream cycle's model rewrite of a merge group (docs/dream.md, llmem_hooks/dream/rewrite.py)
against the real HTTP fake of Ollama: an accepted sentence replaces the kept text (and undo
puts the old one back), a proposal that loses or invents a fact is refused, a model that is
down or slow leaves the old behaviour, a dry run asks nothing, and a secret in a member
never reaches the model."""

from __future__ import annotations

import copy
import json
import socket
from pathlib import Path
from typing import Any

import pytest

from llmem_hooks import Dreamer, MemoryStore
from llmem_hooks.config import DEFAULT_CONFIG
from llmem_hooks.dream.rewrite import check_proposal, fact_tokens

P = "acme/api"
KEPT = "The API stores its data in PostgreSQL 16 on port 5432."
OTHER = "the api stores data in postgresql 16 on port 5432"
GOOD = "The API keeps all of its data in PostgreSQL 16, listening on port 5432."
SECRET = "ghp_abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"


def config(url: str, **dream: Any) -> dict[str, Any]:
    cfg = copy.deepcopy(DEFAULT_CONFIG)
    cfg["ollama"]["base_url"] = url
    cfg["dream"].update({"model_rewrite": True, **dream})
    return cfg


def seed(store: MemoryStore) -> None:
    store.import_memories(
        [
            {"id": "keep", "type": "fact", "content": KEPT, "project": P, "confidence": 0.9},
            {"id": "dup", "type": "fact", "content": OTHER, "project": P, "confidence": 0.5},
            {"id": "else", "type": "fact", "content": "Deploys go through staging first.",
             "project": P},
        ]
    )  # fmt: skip


def answer(text: str) -> Any:
    return lambda body: json.dumps({"text": text})


def generate_bodies(srv: Any) -> list[dict[str, Any]]:
    return list(srv.control.bodies("/api/generate"))


def test_group_takes_the_model_sentence_and_undo_restores(
    store: MemoryStore, llmem_home: Path, fake_ollama: tuple[Any, str]
) -> None:
    srv, url = fake_ollama
    srv.control.responder = answer(GOOD)
    llmem_home.mkdir(parents=True, exist_ok=True)
    seed(store)
    old_hash = store.conn.execute("SELECT content_hash FROM memories WHERE id = 'keep'").fetchone()
    run = Dreamer(store, config(url)).run(["light"], apply=True)
    (group,) = run.results[0].merged
    assert group["id"] == "keep" and group["rewrite"] == "accepted"
    kept = store.get("keep")
    assert kept["content"] == GOOD and kept["metadata"]["rewritten_by"] == "llama3.2"
    assert store.get("dup")["invalidation_reason"] == "merged into keep"
    assert [h["id"] for h in store.search("listening")] == ["keep"]
    # one request, the JSON schema in `format`, both members in the prompt; budget charged
    (body,) = generate_bodies(srv)
    assert body["format"]["required"] == ["text"]
    assert KEPT in body["prompt"] and OTHER in body["prompt"]
    usage = store.conn.execute(
        "SELECT session_key, calls FROM model_usage WHERE session_key LIKE 'dream:%'"
    ).fetchall()
    assert [tuple(r) for r in usage] == [(f"dream:{run.run_id}", 1)]
    assert "rewritten by the model" in (llmem_home / "dream-diary.md").read_text()
    # undo: the old text, its hash and its search words come back
    Dreamer(store, config(url)).undo(run.run_id)
    assert store.get("keep")["content"] == KEPT and store.get("dup")["valid_until"] is None
    assert "rewritten_by" not in store.get("keep")["metadata"]
    assert (
        store.conn.execute("SELECT content_hash FROM memories WHERE id = 'keep'").fetchone()
        == old_hash
    )
    assert store.search("listening") == []


@pytest.mark.parametrize(
    ("proposal", "why"),
    [
        ("The API stores its data in PostgreSQL 16.", "rejected: drops 5432"),
        ("The API stores its data in PostgreSQL 17 on port 5432.", "rejected: drops 16"),
        ("The API stores data in PostgreSQL 16 on port 5432 and 6432.", "rejected: adds 6432"),
        ("", "rejected: empty"),
        (KEPT + " " + KEPT, "rejected: too long"),
        ("The API stores data in PostgreSQL 16 on port 5432, password=hunter2x", "rejected: adds"),
    ],
)
def test_a_proposal_that_loses_or_invents_a_fact_is_refused(
    store: MemoryStore, llmem_home: Path, fake_ollama: tuple[Any, str], proposal: str, why: str
) -> None:
    srv, url = fake_ollama
    srv.control.responder = answer(proposal)
    llmem_home.mkdir(parents=True, exist_ok=True)
    seed(store)
    (group,) = Dreamer(store, config(url)).run(["light"], apply=True).results[0].merged
    assert group["rewrite"].startswith(why)
    assert store.get("keep")["content"] == KEPT  # the best text stays
    assert store.get("dup")["invalidation_reason"] == "merged into keep"  # the merge still ran
    assert len(generate_bodies(srv)) == 1


def test_check_proposal_refuses_what_the_redaction_changes() -> None:
    assert (
        check_proposal("deploy with password=hunter2x", ["deploy with password=hunter2x"])[1]
        == "holds what the redaction removes"
    )
    assert check_proposal("  Run  uv sync --frozen.\n", ["run uv sync --frozen"]) == (
        "Run uv sync --frozen.",
        "accepted",
    )


def test_fact_tokens() -> None:
    got = fact_tokens("Use Python 3.11, run `uv sync --frozen` in src/app.py; see myVar, e.g. API.")
    assert got >= {"3.11", "--frozen", "src/app.py", "myvar"}
    assert not got & {"python", "use", "api", "run", "sync"}


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_a_model_that_is_down_leaves_the_old_merge(store: MemoryStore, llmem_home: Path) -> None:
    llmem_home.mkdir(parents=True, exist_ok=True)
    seed(store)
    store.import_memories(
        [
            {"id": "b1", "type": "fact", "content": "Tests run with pytest -q in CI.", "project": P,
             "confidence": 0.9},
            {"id": "b2", "type": "fact", "content": "tests run with pytest -q in ci", "project": P},
        ]
    )  # fmt: skip
    run = Dreamer(store, config(closed_port_url())).run(["light"], apply=True)
    light = run.results[0]
    assert not light.errors
    statuses = sorted(g["rewrite"] for g in light.merged)
    assert len(statuses) == 2 and all(s.startswith("skipped:") for s in statuses)
    assert any("cannot connect" in s for s in statuses)  # the first one asked ...
    assert any("backing off" in s or "cannot connect" in s for s in statuses)
    assert store.get("keep")["content"] == KEPT
    assert store.get("dup")["invalidation_reason"] == "merged into keep"
    # ... and the failure is shared with the next processes (the back-off file)
    assert "cannot connect" in (llmem_home / "model-backoff.json").read_text()


def test_a_slow_model_times_out_and_the_cycle_goes_on(
    store: MemoryStore, llmem_home: Path, fake_ollama: tuple[Any, str]
) -> None:
    srv, url = fake_ollama
    srv.control.responder = answer(GOOD)
    srv.control.delay_ms = 1500
    llmem_home.mkdir(parents=True, exist_ok=True)
    seed(store)
    cfg = config(url)
    cfg["ollama"]["timeout_seconds"] = 0.3
    (group,) = Dreamer(store, cfg).run(["light"], apply=True).results[0].merged
    assert group["rewrite"].startswith("skipped:") and "in time" in group["rewrite"]
    assert store.get("keep")["content"] == KEPT
    assert json.loads((llmem_home / "model-backoff.json").read_text())[url]["kind"] == "timeout"


def test_a_dry_run_asks_nothing_and_off_by_default(
    store: MemoryStore, llmem_home: Path, fake_ollama: tuple[Any, str]
) -> None:
    srv, url = fake_ollama
    srv.control.responder = answer(GOOD)
    llmem_home.mkdir(parents=True, exist_ok=True)
    seed(store)
    (group,) = Dreamer(store, config(url)).run(["light"], apply=False).results[0].merged
    assert group["rewrite"] == "would ask the model"
    off = config(url, model_rewrite=False)
    (group,) = Dreamer(store, off).run(["light"], apply=True).results[0].merged
    assert "rewrite" not in group and store.get("keep")["content"] == KEPT
    assert generate_bodies(srv) == []


def test_a_secret_in_a_member_never_reaches_the_model(
    store: MemoryStore, llmem_home: Path, fake_ollama: tuple[Any, str]
) -> None:
    srv, url = fake_ollama
    srv.control.responder = answer(GOOD)
    llmem_home.mkdir(parents=True, exist_ok=True)
    seed(store)
    # a row written before a redaction rule existed: the secret is in the stored text
    store.conn.execute(
        "UPDATE memories SET content = ? WHERE id = 'dup'", (f"{OTHER} token {SECRET}",)
    )
    store.conn.commit()
    assert SECRET in store.get("dup")["content"]
    cfg = config(url, merge_overlap=0.5)
    (group,) = Dreamer(store, cfg).run(["light"], apply=True).results[0].merged
    (body,) = generate_bodies(srv)
    assert SECRET not in json.dumps(body) and "[REDACTED]" in body["prompt"]
    assert group["rewrite"] == "accepted" and SECRET not in store.get("keep")["content"]
