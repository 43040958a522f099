"""The conversational benchmark in process (bench/conversational.py): the authored
two-person conversations of tests/fixtures/conversations/, their episodes built and stored
as the coordinator stores them, every question through `Retriever.find` keyword-only (no
model). The floors sit a little under what was measured (docs/benchmarks.md) so that a
retrieval change that loses conversational questions shows up here."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from llmem_hooks import MemoryStore
from llmem_hooks.text.query import parse_query

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import conversational

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "conversations"


def _scores(tmp_path: Path, convs: list[dict[str, Any]]) -> dict[str, Any]:
    with MemoryStore(tmp_path / "memory.db") as store:
        stored = conversational.store_in_process(store, convs)
        assert stored >= 8 * 8 * len(convs)  # >= 8 sessions of >= 8 exchanges each
        scores, _ = conversational.evaluate(convs, conversational.in_process_asker(store))
    return scores


def test_the_set_is_what_its_readme_promises() -> None:
    convs = [json.loads(p.read_text()) for p in sorted(FIXTURES.glob("*.json"))]
    assert len(convs) >= 4
    assert {c["split"] for c in convs} == {"dev", "heldout"}
    kinds: Counter[str] = Counter()
    for conv in convs:
        assert len(conv["speakers"]) == 2
        assert len(conv["sessions"]) >= 8
        turns = {t["id"] for s in conv["sessions"] for t in s["turns"]}
        for s in conv["sessions"]:
            assert len(s["turns"]) >= 15
            assert {t["speaker"] for t in s["turns"]} == set(conv["speakers"])
        for q in conv["questions"]:
            assert q["evidence"] and set(q["evidence"]) <= turns, q["id"]
            kinds[q["kind"]] += 1
    assert sum(kinds.values()) >= 120
    assert set(kinds) == {"single", "temporal", "multihop", "speaker", "quoted", "paraphrase"}


@pytest.mark.parametrize(
    ("split", "recall10", "recall5"),
    [("dev", 0.88, 0.80), ("heldout", 0.80, 0.70)],
)
def test_recall_floor(tmp_path: Path, split: str, recall10: float, recall5: float) -> None:
    scores = _scores(tmp_path, conversational.load(split))[split]["all"]
    assert scores["recall@10"] >= recall10, scores
    assert scores["recall@5"] >= recall5, scores


LONG = Path(__file__).resolve().parents[1] / "fixtures" / "conversations_long"


def test_the_long_set_in_one_store_keeps_its_floor(tmp_path: Path) -> None:
    """The six long chats (16 sessions each, tests/fixtures/conversations_long) in one
    store, as `bench/conversational.py --folder ... --split all` runs them (measured in
    docs/benchmarks.md, beside the plain keyword floor)."""
    convs = conversational.convsets.load(LONG)
    assert len(convs) == 6 and sum(len(c["questions"]) for c in convs) == 360
    scores = _scores(tmp_path, convs)
    for split in ("dev", "heldout"):
        assert scores[split]["all"]["recall@10"] >= 0.79, scores[split]["all"]
        assert scores[split]["all"]["recall@5"] >= 0.71, scores[split]["all"]


HARD = Path(__file__).resolve().parents[1] / "fixtures" / "conversations_hard"


def test_the_harder_chats_stay_above_the_keyword_floor(tmp_path: Path) -> None:
    """The two chats whose questions avoid their evidence's words (tests/fixtures/
    conversations_hard) in one store: ours stays above the plain keyword floor on each
    half, by 0.05 at @5 (set B's target) and 0.1 at @10 (measured @5 / @10: dev 0.615 /
    0.707, held out 0.592 / 0.706; the floor 0.306 / 0.469 and 0.497 / 0.567)."""
    convs = conversational.convsets.load(HARD)
    assert [c["split"] for c in convs] == ["dev", "heldout"]
    assert all(len(c["questions"]) == 60 and len(c["sessions"]) == 16 for c in convs)
    scores = _scores(tmp_path, convs)
    for split in ("dev", "heldout"):
        m = scores[split]["all"]
        assert m["recall@10"] >= m["floor@10"] + 0.1, m
        assert m["recall@5"] >= m["floor@5"] + 0.05, m


def test_a_slice_finds_evidence_said_another_way(tmp_path: Path) -> None:
    """Two conversations in one store: the paraphrased questions (irregular verbs,
    British/American words, a general word for a kind) still find their turn."""
    scores = _scores(tmp_path, conversational.load(only=["c1", "c2"]))
    assert scores["all"]["paraphrase"]["recall@10"] >= 0.7, scores["all"]["paraphrase"]


def test_question_words_widen_to_other_forms_one_way_for_kinds() -> None:
    alts = parse_query("What did Ana buy for the elevator?").alternatives
    assert "bought" in alts["buy"] and "lift" in alts["elevator"]
    assert "football" in parse_query("Which sport does Ana play?").alternatives["sport"]
    assert "football" in parse_query("Which sports?").alternatives["sports"]
    # plurals of the general word: -ies, -es
    assert "sprained" in parse_query("What injuries did he get?").alternatives["injuries"]
    assert "clarinet" in parse_query("Which instruments?").alternatives["instruments"]
    assert "granddaughter" in parse_query("Her grandchildren?").alternatives["grandchildren"]
    assert "pottery" in parse_query("What activities does she do?").alternatives["activities"]
    # a clipped word and the long one find each other ("Which saxophone?" / "the alto sax")
    assert "sax" in parse_query("Which saxophone does he play?").alternatives["saxophone"]
    assert "psychology" in parse_query("Is psych hard?").alternatives["psych"]
    assert "employee" in parse_query("Who has she hired?").alternatives["hired"]
    assert "navy" in parse_query("What colours is the boat?").alternatives["colours"]
    # a kind does not stand for its general word, nor for the other kinds
    assert "tennis" not in parse_query("Ana plays football").alternatives.get("football", [])


@pytest.mark.parametrize("one_project", [False, True])
def test_twelve_chats_in_one_store_keep_to_their_people(tmp_path: Path, one_project: bool) -> None:
    """Every chat of the three sets (12 pairs of people) in one store, each its own
    project, or all in one: a question that names someone is answered from where that
    person is (`Retriever._named_first`), not from the other chats' everyday words.
    Measured @10 (docs/benchmarks.md): the long chats' held-out half 0.817 -> 0.863
    (projects) / 0.860 (one project), the harder chats' dev half 0.608 -> 0.667 (both)."""
    sets = [FIXTURES, LONG, HARD]
    convs = [c for folder in sets for c in conversational.convsets.load(folder)]
    assert len(convs) == 12
    with MemoryStore(tmp_path / "memory.db") as store:
        for conv in convs:
            for session in conv["sessions"]:
                turns = [
                    (
                        t["id"],
                        role,
                        f"{'User' if role == 'user' else 'Assistant'}: {conversational.said(t)}",
                        ms,
                    )
                    for t, role, ms in conversational.roles(session)
                ]
                project = "one" if one_project else conv["id"]
                conversational.convsets.store_episodes(store, project, session["id"], turns)
        ask = conversational.in_process_asker(store)
        long_scores, _ = conversational.evaluate(
            [c for c in convs if c["id"] in {"c5", "c6", "c7", "c8", "c9", "c10"}], ask
        )
        hard_scores, _ = conversational.evaluate(
            [c for c in convs if c["id"] in {"c11", "c12"}], ask
        )
    assert long_scores["heldout"]["all"]["recall@10"] >= 0.84, long_scores["heldout"]["all"]
    assert long_scores["dev"]["all"]["recall@10"] >= 0.83, long_scores["dev"]["all"]
    assert hard_scores["dev"]["all"]["recall@10"] >= 0.64, hard_scores["dev"]["all"]
