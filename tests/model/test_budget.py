"""Model budgets: usage recorded per UTC day and session in memory.db, caps checked before
every call, the request timeout bounded by the seconds left, fallback to the heuristics
past a cap (until the next day for day caps, for the rest of the session for session
caps), and `llmem-hooks stats` showing today's usage."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from llmem_hooks import MemoryStore, Message
from llmem_hooks.cli import main
from llmem_hooks.config import DEFAULT_CONFIG
from llmem_hooks.extraction.engine import ExtractionEngine
from llmem_hooks.extraction.llm import build_extraction_engine
from llmem_hooks.model.budget import (
    BudgetLimits,
    ModelBudget,
    Usage,
    estimate_tokens,
    utc_day,
)

DAY0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
LEARNED = "Pin tzdata to 2024a in requirements-dev.txt to fix the flaky date test"


class Clock:
    """Epoch seconds the test moves by hand."""

    def __init__(self, t: float = DAY0 + 3600) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def answer_with_a_memory(body: dict[str, Any]) -> str:
    item = {
        "type": "procedure",
        "content": LEARNED,
        "confidence": 0.9,
        "tags": [],
        "scope": "project",
        "source_message_ids": [],
    }
    return json.dumps({"memories": [item]})


def msgs(sid: str = "ses_a") -> list[Message]:
    return [Message("msg_1", sid, "user", "User: the date test is flaky again")]


@pytest.fixture
def make_engine(
    store: MemoryStore, fake_ollama: tuple[Any, str]
) -> Callable[..., tuple[ExtractionEngine, Any]]:
    srv, url = fake_ollama
    srv.control.responder = answer_with_a_memory

    def make(clock: Clock | None = None, **budget: Any) -> tuple[ExtractionEngine, Any]:
        cfg = copy.deepcopy(DEFAULT_CONFIG)
        cfg["ollama"]["base_url"] = url
        cfg["budget"].update(budget)
        engine = build_extraction_engine(cfg, store, clock=clock or Clock())
        return engine, srv

    return make


def test_estimate_and_day() -> None:
    assert (
        estimate_tokens("") == 0 and estimate_tokens("abcd") == 1 and estimate_tokens("abcde") == 2
    )
    assert utc_day(DAY0) == "2026-01-01" and utc_day(DAY0 - 1) == "2025-12-31"
    assert BudgetLimits.from_config(DEFAULT_CONFIG["budget"]) == BudgetLimits()
    assert BudgetLimits.from_config({"day_tokens": 5}).day_tokens == 5


def test_usage_is_recorded_per_day_and_session(store: MemoryStore) -> None:
    clock = Clock()
    budget = ModelBudget(store, BudgetLimits(), clock=clock)
    budget.record("opencode:a", prompt_tokens=100, output_tokens=20, seconds=1.5)
    budget.record("opencode:a", prompt_tokens=50, output_tokens=5, seconds=0.5)
    budget.record("copilot:b", prompt_tokens=10, output_tokens=1, seconds=0.25)
    assert budget.day_usage() == Usage(3, 160, 26, 2.25)
    assert budget.session_usage("opencode:a") == Usage(2, 150, 25, 2.0)
    clock.t += 86400
    assert budget.day_usage() == Usage()
    budget.record("opencode:a", prompt_tokens=1, output_tokens=1, seconds=0.1)
    assert budget.session_usage("opencode:a").calls == 3  # sessions span days
    rows = store.conn.execute("SELECT day, session_key, calls FROM model_usage ORDER BY 1, 2")
    assert [tuple(r) for r in rows] == [
        ("2026-01-01", "copilot:b", 1),
        ("2026-01-01", "opencode:a", 2),
        ("2026-01-02", "opencode:a", 1),
    ]


@pytest.mark.parametrize(
    ("limits", "spend", "reason"),
    [
        (BudgetLimits(day_tokens=100), {"prompt_tokens": 100}, "day token cap"),
        (BudgetLimits(day_seconds=2), {"seconds": 2.0}, "day time cap"),
        (BudgetLimits(session_tokens=100), {"prompt_tokens": 100}, "session token cap"),
        (BudgetLimits(session_seconds=2), {"seconds": 2.0}, "session time cap"),
    ],
)
def test_each_cap_stops_the_model(
    store: MemoryStore, limits: BudgetLimits, spend: dict[str, Any], reason: str
) -> None:
    budget = ModelBudget(store, limits, clock=Clock())
    assert budget.check("s").allowed
    budget.record("s", **{"prompt_tokens": 0, "output_tokens": 0, "seconds": 0.0, **spend})
    check = budget.check("s")
    assert not check.allowed and check.reason.startswith(reason)
    if reason.startswith("session"):
        assert budget.check("other").allowed  # another session still may


def test_a_call_that_would_not_fit_is_refused(store: MemoryStore) -> None:
    budget = ModelBudget(store, BudgetLimits(session_tokens=1000), clock=Clock())
    budget.record("s", prompt_tokens=900, output_tokens=0, seconds=0)
    assert budget.check("s", need_tokens=50).allowed
    check = budget.check("s", need_tokens=200)
    assert not check.allowed and "needs ~200" in check.reason and check.tokens_left == 100


def test_zero_caps_mean_no_model(store: MemoryStore) -> None:
    budget = ModelBudget(store, BudgetLimits(day_tokens=0), clock=Clock())
    assert not budget.check("s").allowed


def test_the_remaining_seconds_bound_the_request_timeout(
    make_engine: Callable[..., tuple[ExtractionEngine, Any]], store: MemoryStore
) -> None:
    """A slow model past the time budget: the call is cut at the budget, charged, and the
    next call falls back without asking."""
    engine, srv = make_engine(session_seconds=0.5)
    srv.control.delay_ms = 1500
    found = engine.extract(msgs(), project=None)
    assert found == [] and "time budget ran out" in engine.last_run
    used = ModelBudget(store, clock=Clock()).session_usage("ses_a")
    assert used.calls == 1 and 0.4 <= used.seconds < 1.4  # charged, cut at ~0.5 s
    engine.extract(msgs(), project=None)
    assert len(srv.control.bodies("/api/generate")) == 1  # not asked again
    assert engine.last_run.startswith("heuristic: session time cap")


def test_a_day_cap_falls_back_until_the_next_day(
    make_engine: Callable[..., tuple[ExtractionEngine, Any]], store: MemoryStore
) -> None:
    clock = Clock()
    engine, srv = make_engine(clock, day_tokens=10_000)
    assert [c.content for c in engine.extract(msgs(), project=None)] == [LEARNED]
    budget = ModelBudget(store, BudgetLimits(day_tokens=10_000), clock=clock)
    spent = budget.day_usage()
    assert spent.calls == 1 and spent.prompt_tokens > 0 and spent.output_tokens > 0
    budget.record("elsewhere", prompt_tokens=10_000, output_tokens=0, seconds=0)
    assert engine.extract(msgs("ses_b"), project=None) == []
    assert engine.last_run.startswith("heuristic: day token cap")
    clock.t += 12 * 3600  # still the same UTC day
    engine.extract(msgs("ses_c"), project=None)
    assert engine.last_run.startswith("heuristic: day token cap")
    clock.t = DAY0 + 86400 + 60  # the next UTC day
    assert [c.content for c in engine.extract(msgs("ses_d"), project=None)] == [LEARNED]
    assert engine.last_run.startswith("ollama:")
    assert len(srv.control.bodies("/api/generate")) == 2


def test_a_session_cap_lasts_for_the_rest_of_the_session(
    make_engine: Callable[..., tuple[ExtractionEngine, Any]], store: MemoryStore
) -> None:
    clock = Clock()
    engine, _ = make_engine(clock, session_tokens=2000)
    ModelBudget(store, clock=clock).record("ses_a", prompt_tokens=2000, output_tokens=0, seconds=0)
    engine.extract(msgs("ses_a"), project=None)
    assert engine.last_run.startswith("heuristic: session token cap")
    clock.t += 86400  # a new day does not reset a session's cap
    engine.extract(msgs("ses_a"), project=None)
    assert engine.last_run.startswith("heuristic: session token cap")
    engine.extract(msgs("ses_b"), project=None)
    assert engine.last_run.startswith("ollama:")


def test_missing_token_counts_are_estimated(store: MemoryStore) -> None:
    """Ollama normally reports prompt_eval_count / eval_count; a server that does not gets
    its calls charged by the text's length (characters / 4)."""
    import threading

    from support.fake_ollama import Control, Handler, QuietServer

    class NoCounts(Handler):
        def _send(
            self, status: int, obj: Any = None, text: Any = None, ctype: str = "application/json"
        ) -> None:
            if isinstance(obj, dict):
                obj = {k: v for k, v in obj.items() if k not in ("prompt_eval_count", "eval_count")}
            super()._send(status, obj, text, ctype)

    srv = QuietServer(("127.0.0.1", 0), NoCounts)  # closes its keep-alive connections
    srv.control = Control(responder=answer_with_a_memory)  # type: ignore[attr-defined]
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        cfg = copy.deepcopy(DEFAULT_CONFIG)
        cfg["ollama"]["base_url"] = f"http://127.0.0.1:{srv.server_address[1]}"
        engine = build_extraction_engine(cfg, store, clock=Clock())
        assert [c.content for c in engine.extract(msgs(), project=None)] == [LEARNED]
        (body,) = srv.control.bodies("/api/generate")  # type: ignore[attr-defined]
    finally:
        srv.shutdown()
        srv.server_close()
    used = ModelBudget(store, clock=Clock()).day_usage()
    assert used.prompt_tokens == estimate_tokens(body["system"]) + estimate_tokens(body["prompt"])
    assert used.output_tokens == estimate_tokens(answer_with_a_memory(body))


# -- llmem-hooks stats --------------------------------------------------------------------
def test_stats_shows_todays_usage_and_the_caps(
    llmem_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with MemoryStore(llmem_home / "memory.db") as st:
        budget = ModelBudget(st)
        budget.record("opencode:ses_a", prompt_tokens=1200, output_tokens=300, seconds=4.5)
        budget.record("copilot:b", prompt_tokens=100, output_tokens=0, seconds=0.5)
        yesterday = ModelBudget(st, clock=lambda: budget.clock() - 86400)
        yesterday.record("opencode:old", prompt_tokens=9999, output_tokens=0, seconds=99)
    assert main(["stats", "--json"]) == 0
    usage = json.loads(capsys.readouterr().out)["model_usage"]
    assert usage["today"]["calls"] == 2 and usage["today"]["tokens"] == 1600
    assert usage["today"]["prompt_tokens"] == 1300 and usage["today"]["seconds"] == 5.0
    assert usage["caps"] == {
        "session_tokens": 50000,
        "session_seconds": 300.0,
        "day_tokens": 500000,
        "day_seconds": 3600.0,
    }
    assert usage["day_tokens_left"] == 500000 - 1600 and usage["sessions_today"] == 2

    assert main(["stats"]) == 0
    out = capsys.readouterr().out
    assert "model usage today" in out
    assert "2 calls, 1600 tokens (1300 prompt + 300 output) of 500000, 5.0 s of 3600 s" in out
    assert "per session: 50000 tokens, 300 s" in out
    assert main(["stats", "--markdown"]) == 0
    assert "- 2 calls, 1600 tokens" in capsys.readouterr().out
