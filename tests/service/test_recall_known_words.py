"""What a new memory adds to the session's answer (issue 20 §1, recall blocks).

A new hit is measured against the best memory the session already has (its context,
earlier blocks) with the words that memory holds counting half
(`relevance.KNOWN_WEIGHT`): a sibling repeating the words of the session's answer, plus a
word or two of its own, is noise ("asked for the ledger database's port, it gave the
metrics exporter's"), while a memory about the prompt's other words is what the session
lacks. Measured on labelled prompts: bench/recall_blocks.py, docs/benchmarks.md.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from llmem_hooks import MemoryStore
from llmem_hooks.search.relevance import idf_weights, weighed_relevance
from llmem_hooks.service.operations import QueryService
from llmem_hooks.text.query import parse_query

NO_MODEL = {"ollama": {"enabled": False}}
FILLER = [  # other memories, so the question's words are rare ones
    "Use ruff for linting; black is no longer used",
    "Releases are tagged vX.Y.Z by the release workflow",
    "The design docs live in docs/adr, one file per decision",
    "Feature flags come from Unleash, project main",
    "Code review needs one approval from the owning team",
    "Sentry receives errors from every service, one project each",
]


@pytest.fixture
def svc(store: MemoryStore) -> Iterator[QueryService]:
    with QueryService(store, NO_MODEL) as service:
        for text in FILLER:
            assert service.remember(text)["status"] == "stored"
        yield service


def _fact(svc: QueryService, content: str) -> str:
    out = svc.remember(content)
    assert out["status"] == "stored", out
    return str(out["id"])


def test_a_sibling_repeating_the_sessions_answer_is_not_given(svc: QueryService) -> None:
    answer = _fact(svc, "Ledger's database: Postgres on port 5433")
    _fact(svc, "The ledger database's metrics exporter listens locally on port 9187")
    _fact(svc, "Run the web app locally; it listens for changes")
    first = svc.recall("ses_1", "which Postgres does the ledger use?")
    assert first["ids"] == [answer], first
    # the exporter holds every word of the question, three of them the answer's too
    out = svc.recall("ses_1", "which port does the ledger database listen on locally?")
    assert out["block"] == "" and out["reason"] == "already_given", out


def test_a_memory_about_the_prompts_other_words_is_given(svc: QueryService) -> None:
    _fact(svc, "Stripe webhook events arrive at /hooks/stripe")
    rotate = _fact(svc, "To rotate a signing secret, run make rotate-secret and redeploy")
    first = svc.recall("ses_1", "where do stripe webhook events arrive?")
    assert first["ids"] and rotate not in first["ids"], first
    # the session has the webhook's memory (two of five words); the rest is new to it
    out = svc.recall("ses_1", "how do I rotate the stripe webhook signing secret")
    assert out["ids"] == [rotate], out


def test_known_words_count_half_in_a_memory_but_fully_in_the_prompt() -> None:
    parsed = parse_query("ledger port exporter")
    weights = idf_weights(parsed.terms, {"ledger": 1, "port": 1, "exporter": 1}, 10, 2.0)
    mem = {"content": "the ledger exporter listens on port 9187"}
    assert weighed_relevance(parsed, weights)(mem, None) == pytest.approx(1.0)
    fresh = weighed_relevance(parsed, weights, known={"ledger", "port"})
    assert fresh(mem, None) == pytest.approx(2 / 3)  # (0.5 + 0.5 + 1) / 3
    assert fresh({"content": "ledger"}, None) == pytest.approx(1 / 6)
