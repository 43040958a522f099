"""The two events a comparison question names (`text.comparisons`), by the sentence's shape."""

from __future__ import annotations

import subprocess
import sys

import pytest

from llmem_hooks.text.comparisons import event_clauses


@pytest.mark.parametrize(
    ("question", "events"),
    [
        (
            "Which happened first: fixing the pool timeouts, or choosing the job queue?",
            ("fixing the pool timeouts", "choosing the job queue"),
        ),
        (
            "Which came first, the cache rewrite or splitting the settings per environment?",
            ("the cache rewrite", "splitting the settings per environment"),
        ),
        (
            "Which event did I attend first, the pottery workshop or my cousin's wedding?",
            ("the pottery workshop", "my cousin's wedding"),
        ),
        (
            "How long after the double payout did the idempotency release ship?",
            ("the double payout", "the idempotency release ship"),
        ),
        (
            "How many weeks after hurting his knee was Tomas cleared to run again?",
            ("hurting his knee", "Tomas cleared to run again"),
        ),
        (
            "Did we add the retry jitter before or after moving metrics to 8443?",
            ("Did we add the retry jitter", "moving metrics to 8443"),
        ),
        (
            "How many days passed between buying the bike and the first long ride?",
            ("buying the bike", "the first long ride"),
        ),
        (
            "Roughly how long did we run with short access tokens before doubling them?",
            ("we run with short access tokens", "doubling them"),
        ),
    ],
)
def test_a_question_comparing_two_events_in_time_names_both(
    question: str, events: tuple[str, str]
) -> None:
    assert event_clauses(question) == events


@pytest.mark.parametrize(
    "question",
    [
        "Who climbs better, Leo or Jamal?",  # a choice, no order in time
        "Is prod RDS single-AZ or Multi-AZ going forward?",
        "Was arq my idea or yours?",  # one side holds no telling word
        "Did I or did you add lock_timeout to the roles file?",
        "What version did we first pin of the job library?",  # one event
        "When did Nadia adopt Pepper?",
        "",
        "first or " * 100,  # over the length taken apart
    ],
)
def test_other_questions_are_left_whole(question: str) -> None:
    assert event_clauses(question) is None


def test_taking_a_question_apart_stays_linear_on_adversarial_text() -> None:
    """The patterns run on whatever a user or an agent asks: no nested repetition, so a
    long run of "or"s and "and"s cannot make them backtrack for seconds (a subprocess, so a
    regression fails instead of hanging the suite)."""
    code = (
        "from llmem_hooks.text.comparisons import event_clauses\n"
        "import time\n"
        "for q in ['how long after ' + 'a ' * 190 + 'did', 'between ' + 'x and ' * 60,"
        " 'first ' + ', or ' * 120, 'how many ' + 'days ' * 70 + 'before']:\n"
        "    t = time.perf_counter(); event_clauses(q); assert time.perf_counter() - t < 1\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=20)
