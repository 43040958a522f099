"""`terms_held` reads a memory once for all of a question's words (recall reads dozens of
memories a prompt): it must say exactly what one search per word says, stems that start
one another ("deplo" / "deploy" / "deployment") and synonyms included."""

from __future__ import annotations

import random
import re

from llmem_hooks.search.matching import _short_tail, _stem, terms_held
from llmem_hooks.text.query import parse_query

WORDS = """
deploy deploying deployment deployed staging stage stages port ports ledger led database db
databases postgres pg api apis test tests testing tester run running rerun release releases
relay k8s kubernetes prod production product env environment
""".split()  # noqa: SIM905 - a word list reads better as text


def _one_search_per_word(question: str, text: str) -> list[bool]:
    parsed = parse_query(question)
    out = []
    for t in parsed.terms:
        alts = (t, *parsed.alternatives.get(t, ()))
        # a long word by its stem's start; a word of 4 letters or fewer whole, or with an
        # ending ("led" is not "ledger")
        pieces = [
            re.escape(_stem(a)) + ("" if len(a) > 4 else _short_tail(a.lower())) for a in alts
        ]
        pattern = r"(?<!\w)(?:" + "|".join(pieces) + ")"
        out.append(re.search(pattern, text, re.IGNORECASE) is not None)
    return out


def test_one_pass_equals_one_search_per_word() -> None:
    rng = random.Random(20)
    for _ in range(2000):
        question = " ".join(rng.sample(WORDS, rng.randint(1, 6)))
        text = " ".join(
            rng.choice([w, w.upper(), w.title(), f"x{w}", f"{w}!"])
            for w in rng.sample(WORDS, rng.randint(0, 12))
        )
        held = terms_held(parse_query(question))({"content": text, "tags": ["ops"]})
        assert held == _one_search_per_word(question, text + " ops"), (question, text)


def test_summary_and_tags_count_and_an_empty_question_holds_nothing() -> None:
    held = terms_held(parse_query("ledger staging"))
    assert held({"content": "nothing here", "summary": "Ledger notes", "tags": ["staging"]}) == [
        True,
        True,
    ]
    assert terms_held(parse_query(""))({"content": "anything"}) == []


def test_an_adverb_is_held_by_its_adjective() -> None:
    """ "and locally?" asks about what a memory says is "Local": an adverb's stem is its
    adjective's ("manually" / "manual"); a short word ending in -ly keeps its own."""
    held = terms_held(parse_query("locally manually weekly"))
    assert held({"content": "Local dev values are in .env; a manual restart, every week"}) == [
        True,
        True,
        False,  # "weekly" is too short to be cut: "week" alone would start "weekend"
    ]
    assert _stem("locally") == _stem("local") and _stem("Manually") == _stem("Manual")
    assert _stem("family") == "famil" and _stem("supply") == "suppl"


def test_a_plural_in_es_is_held_by_its_singular() -> None:
    held = terms_held(parse_query("crashes fixes patches caches"))
    text = "Each crash is reported; a fix ships as a patch; the cache is cleared"
    assert held({"content": text}) == [True, True, True, True]
