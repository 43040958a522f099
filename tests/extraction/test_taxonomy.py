"""The error taxonomy and the model self-assessment built on it (against the fake Ollama),
degrading to the plain-text counts when the model cannot help."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

import llmem_hooks
from llmem_hooks import MemoryStore, Message
from llmem_hooks.config import DEFAULT_CONFIG
from llmem_hooks.extraction.engine import ExtractionEngine
from llmem_hooks.extraction.llm import assessment_schema, build_extraction_engine
from llmem_hooks.extraction.summary import self_assessment
from llmem_hooks.extraction.taxonomy import (
    ERROR_TAXONOMY,
    ERROR_TAXONOMY_KEYS,
    SELF_ASSESSMENT_FIELDS,
    category_tag,
    parse_self_assessment,
)
from llmem_hooks.model.budget import BudgetLimits, ModelBudget

GOOD = {
    "category": "OFF_BY_ONE",
    "what_happened": "The loop in paginate() skipped the last page",
    "caught_by": "a failing test",
    "proposed_fix": "Test the boundary pages first",
    "outcome": "completed",
}


def test_the_eleven_categories_in_the_references_order() -> None:
    assert ERROR_TAXONOMY_KEYS == (
        "NULL_SAFETY",
        "ERROR_HANDLING",
        "OFF_BY_ONE",
        "RACE_CONDITION",
        "AUTH_BYPASS",
        "DATA_INTEGRITY",
        "MISSING_VERIFICATION",
        "EDGE_CASE",
        "PERFORMANCE",
        "DESIGN",
        "REVIEW_PASSED",
    )
    assert ERROR_TAXONOMY["NULL_SAFETY"] == "Missing null/None/undefined checks"
    assert ERROR_TAXONOMY["AUTH_BYPASS"] == "Missing auth checks, SSRF, injection"
    assert ERROR_TAXONOMY["REVIEW_PASSED"] == "Clean review — positive outcome"
    assert ", ".join(ERROR_TAXONOMY_KEYS).startswith("NULL_SAFETY, ERROR_HANDLING")
    assert llmem_hooks.ERROR_TAXONOMY is ERROR_TAXONOMY
    assert llmem_hooks.parse_self_assessment is parse_self_assessment


def test_parse_self_assessment() -> None:
    assert parse_self_assessment("NULL_SAFETY: null pointer dereference") == {
        "category": "NULL_SAFETY",
        "what": "null pointer dereference",
    }
    assert parse_self_assessment("  edge_case :  empty list\nmore text") == {
        "category": "EDGE_CASE",
        "what": "empty list",
    }
    assert parse_self_assessment("REVIEW_PASSED:") == {"category": "REVIEW_PASSED", "what": ""}
    for bad in ("", "just words", "TYPO_SAFETY: x", "Session self-assessment (heuristic): 2"):
        assert parse_self_assessment(bad) is None
    assert category_tag("MISSING_VERIFICATION") == "missing-verification"


def test_the_schema_asks_for_every_field_with_the_taxonomy_as_enum() -> None:
    schema = assessment_schema()
    assert tuple(schema["required"]) == SELF_ASSESSMENT_FIELDS
    assert schema["properties"]["category"]["enum"] == list(ERROR_TAXONOMY_KEYS)


def session() -> list[Message]:
    return [
        Message("m1", "ses_t", "user", "User: paginate the results"),
        Message("m2", "ses_t", "assistant", "Assistant: Tool: bash: pytest -q [error]"),
        Message("m3", "ses_t", "assistant", "Assistant: Fixed the loop bound; tests pass."),
    ]


def engine(url: str, store: MemoryStore, **budget: Any) -> ExtractionEngine:
    cfg = copy.deepcopy(DEFAULT_CONFIG)
    cfg["ollama"]["base_url"] = url
    cfg["budget"].update(budget)
    return build_extraction_engine(cfg, store)


def test_model_self_assessment(fake_ollama: tuple[Any, str], store: MemoryStore) -> None:
    srv, url = fake_ollama
    srv.control.responder = lambda body: json.dumps(GOOD)
    eng = engine(url, store)
    result = eng.assess_session(session(), session_key="opencode:ses_t")
    assert result is not None and eng.last_assessment == "ollama"
    assert result.content == (
        "OFF_BY_ONE: The loop in paginate() skipped the last page. Caught by: a failing test. "
        "Proposed fix: Test the boundary pages first. Outcome: completed."
    )
    assert parse_self_assessment(result.content) == {
        "category": "OFF_BY_ONE",
        "what": "The loop in paginate() skipped the last page. Caught by: a failing test. "
        "Proposed fix: Test the boundary pages first. Outcome: completed.",
    }
    assert result.tags == ["self-assessment", "off-by-one"]
    assert {k: result.metadata[k] for k in SELF_ASSESSMENT_FIELDS} == GOOD
    (body,) = srv.control.bodies("/api/generate")
    assert body["format"] == assessment_schema() and "REVIEW_PASSED" in body["prompt"]
    assert "paginate the results" in body["prompt"]  # the goal
    assert ModelBudget(store).session_usage("opencode:ses_t").calls == 1


@pytest.mark.parametrize(
    "answers",
    [
        ["not json", "not json"],
        [json.dumps({**GOOD, "category": "TYPO"}), json.dumps({})],
        [json.dumps({**GOOD, "outcome": "great"}), json.dumps([GOOD])],
    ],
)
def test_malformed_twice_degrades_to_the_counts(
    fake_ollama: tuple[Any, str], store: MemoryStore, answers: list[str]
) -> None:
    srv, url = fake_ollama
    srv.control.generate_queue[:] = answers
    eng = engine(url, store)
    result = eng.assess_session(session(), session_key="k")
    assert result is not None and result.content == self_assessment(session())
    assert result.tags == ["self-assessment"]
    assert eng.last_assessment.startswith("heuristic:") and "malformed" in eng.last_assessment


def test_malformed_once_is_asked_again(fake_ollama: tuple[Any, str], store: MemoryStore) -> None:
    srv, url = fake_ollama
    srv.control.generate_queue[:] = ["{", json.dumps(GOOD)]
    result = engine(url, store).assess_session(session(), session_key="k")
    assert result is not None and result.content.startswith("OFF_BY_ONE: ")


def test_over_budget_or_down_degrades(fake_ollama: tuple[Any, str], store: MemoryStore) -> None:
    srv, url = fake_ollama
    srv.control.responder = lambda body: json.dumps(GOOD)
    eng = engine(url, store, day_tokens=0)
    result = eng.assess_session(session(), session_key="k")
    assert result is not None and result.content.startswith("Session self-assessment")
    assert eng.last_assessment.startswith("heuristic: day token cap")
    assert srv.control.requests == []

    srv.control.status = 503
    eng = engine(url, store)
    assert eng.assess_session(session(), session_key="k").content.startswith("Session self")  # type: ignore[union-attr]
    assert "HTTP 503" in eng.last_assessment


def test_heuristic_engine_and_empty_sessions(store: MemoryStore) -> None:
    eng = ExtractionEngine()
    result = eng.assess_session(session())
    assert result is not None and result.assessed_by == "heuristic: no model configured"
    assert eng.assess_session([]) is None
    limits = BudgetLimits()
    assert limits.day_tokens == DEFAULT_CONFIG["budget"]["day_tokens"]
