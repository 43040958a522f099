"""A question that names someone or something (issue 23): the projects, or within one
project the sessions, that say the name come first. Many people's chats in one store share
their everyday words ("moved", "flat", "boxes"); the name is what tells them apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmem_hooks import MemoryStore, Retriever
from llmem_hooks.store import MemoryFilter
from llmem_hooks.text.query import names_in, parse_query, written_as_names


@pytest.mark.parametrize(
    ("question", "names"),
    [
        ("How many boxes did Sunniva have when she moved into her flat?", ["sunniva"]),
        ("What did Raúl call his second barbershop?", ["raúl"]),
        ("Where is Krill's vet, and did Émile go to Zürich?", ["krill", "émile", "zürich"]),
        ('What is "Nadia" planting?', ["nadia"]),
        # "Then" opens a sentence: any word may
        ("Is the Stripe webhook fixed? Then Redis.", ["stripe", "redis"]),
        # software words in capitals or mixed case, months and weekdays: no names
        ("What ORM does the FastAPI app use in January and on Monday?", []),
        ("Sunniva moved where?", []),  # a sentence's first word may be any word
        ("what did o'brien and x-ray say", []),
        ("", []),
        # at most four: a pasted text's every capital is not a lookup
        ("Did Ann meet Bob, Cid, Dan, Eve and Fay?", ["ann", "bob", "cid", "dan"]),
    ],
)
def test_names_in_a_question(question: str, names: list[str]) -> None:
    assert names_in(question) == names
    assert parse_query(question).names == names


def _chat(store: MemoryStore, project: str, session: str, text: str) -> str:
    return store.add(
        "conversation",
        text,
        source="episode",
        project=project,
        session_id=session,
        dedupe=False,
    )


def _crowd(store: MemoryStore, project: str | None) -> None:
    """Other people moving flat, with more of the question's words than the answer."""
    for i in range(6):
        _chat(
            store,
            project or f"p-other-{i}",
            f"s-{i}",
            f"User: Owen{i}: How many boxes did the move take, the whole flat?\n"
            f"Assistant: Priya{i}: The move into the new flat took so many boxes, "
            "we moved box after box all day.",
        )


@pytest.mark.parametrize("one_project", [False, True])
def test_the_named_persons_chat_comes_first(tmp_path: Path, one_project: bool) -> None:
    with MemoryStore(tmp_path / "m.db") as store:
        _crowd(store, "p-all" if one_project else None)
        sunniva = "p-all" if one_project else "p-sunniva"
        said = _chat(store, sunniva, "s-sun-1", "User: Sunniva: I finally have a flat!")
        # the answer does not say her name (her friend asks, she answers in the next turn)
        answer = _chat(
            store,
            sunniva,
            "s-sun-1",
            "User: Raul: And the move, how many boxes?\nAssistant: Forty-two, carried up "
            "three floors. The stairs nearly killed me.",
        )
        retriever = Retriever(store)
        question = "How many boxes did Sunniva have when she moved into her flat?"
        hits = retriever.find(question, track_access=False)
        assert {h.id for h in hits[:2]} == {said, answer}
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True)  # a list reads best first
        # a question without the name: the everyday words decide, the crowd first
        plain = retriever.find("how many boxes for the move into the flat?", track_access=False)
        assert plain[0].id not in (said, answer)


def test_no_change_when_every_project_says_the_name(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "m.db") as store:
        ids = [
            _chat(
                store, f"p{i}", f"s{i}", f"User: Redis {'cache ' * (3 - i)}keys expire at midnight"
            )
            for i in range(3)
        ]
        question = "When do the Redis cache keys expire?"
        hits = Retriever(store).find(question, track_access=False)
        assert [h.id for h in hits] == ids  # best BM25 first, as without a name


def test_a_global_memory_that_says_the_name_stays_first(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "m.db") as store:
        _crowd(store, None)
        _chat(store, "p-sunniva", "s-sun", "User: Sunniva: the boat trip is on Friday")
        note = store.add("fact", "Sunniva numbers her cartons.", dedupe=False)
        hits = Retriever(store).find("How many boxes did Sunniva move?", track_access=False)
        assert {h.memory["project"] for h in hits[:2]} <= {"p-sunniva", None}
        assert note in [h.id for h in hits[:2]]


def test_a_search_within_a_project_orders_its_sessions(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "m.db") as store:
        _crowd(store, "p-all")
        _chat(store, "p-all", "s-sun", "User: Sunniva: hello again, I moved!")
        answer = _chat(store, "p-all", "s-sun", "User: Raul: boxes?\nAssistant: forty-two")
        hits = Retriever(store).find(
            "How many boxes did Sunniva have in the move into the flat?",
            MemoryFilter(project="p-all"),
            track_access=False,
        )
        assert answer in [h.id for h in hits[:2]]
        assert all(h.memory["session_id"] == "s-sun" for h in hits[:2])


def test_names_that_imitate_search_syntax_are_words(tmp_path: Path) -> None:
    """A name is looked up as a quoted FTS5 term: quotes, stars and operators in the
    question's text never reach FTS5 as syntax."""
    with MemoryStore(tmp_path / "m.db") as store:
        _crowd(store, None)
        for q in (
            'What did Nadia" OR "x say?',
            "Did Near(x y) and Or* mention Sunniva?",
            "Was Fts_scope or Content the name?",
        ):
            Retriever(store).find(q, track_access=False)  # no error
        assert store.saying('Na"dia', ["p-other-0"]) == set()
        assert store.saying("Priya0", ["p-other-0", "p-other-1", "nope"]) == {"p-other-0"}
        assert store.saying("Priya0", ["s-0", "s-1"], by="session_id") == {"s-0"}
        # sessions stored interleaved: the span of one holds the other's rows
        for n in range(4):
            _chat(store, "p-x", "s-a", f"User: Ingrid: note {n}")
            _chat(store, "p-x", "s-b", f"User: Kofi: note {n}")
        assert store.saying("ingrid", ["s-a", "s-b"], by="session_id") == {"s-a"}
        assert store.saying("anything", []) == set()
        assert store.saying("anything", [], by="session_id") == set()


@pytest.mark.parametrize(
    ("names", "texts", "kept"),
    [
        # the talk about a tool writes it in code, commands and addresses
        (["redis"], ["Redis is up: redis://localhost:6380, `redis-cli ping`, redis.conf"], []),
        (["redis"], ["Redis, Redis and one redis:7 image"], ["redis"]),
        # a person's name stays capitalised; her address does not count
        (["sunniva"], ["Sunniva moved. Sunniva's boxes.", "mail sunniva@example.org"], ["sunniva"]),
        (["sunniva", "redis"], ["nothing about either"], ["sunniva", "redis"]),
        # ... or names its code after it, even when every sentence capitalises it
        (["docker"], ["No Docker socket. Docker daemon.", "the Dockerfile builds"], []),
        (["redis", "graviton"], ["Redis is up: RedisClient()", "the Graviton3 canary"], []),
        (["docker"], ["Docker socket; a Dockerfiles folder, MyDockerfile"], ["docker"]),
        (["fenna"], ["Fenna's choir.\nFenna\nSang. Fenna2000@example.org"], ["fenna"]),
    ],
)
def test_a_name_the_texts_write_in_lower_case_is_a_tool(
    names: list[str], texts: list[str], kept: list[str]
) -> None:
    assert written_as_names(names, texts) == kept


def _thread(store: MemoryStore, session: str, text: str) -> str:
    return _chat(store, "p-shop", session, text)


def _ask_thread(store: MemoryStore, question: str) -> list[str]:
    """The ids a search scoped to the one project finds, best first."""
    hits = Retriever(store).find(question, MemoryFilter(project="p-shop"), track_access=False)
    return [h.id for h in hits]


def test_a_tool_the_talk_writes_in_lower_case_orders_no_sessions(tmp_path: Path) -> None:
    """ "Redis" in a question is a tool the project talks about in code, not someone the
    answer's session must name: the answer, whose session never says it, stays first."""
    with MemoryStore(tmp_path / "m.db") as store:
        _thread(
            store,
            "s-1",
            "User: is it up?\nAssistant: yes: redis://localhost:6380 answers, "
            "`redis-cli ping` says PONG, redis.conf is read.",
        )
        _thread(store, "s-1", "User: Redis memory?\nAssistant: Redis uses 40 MB; keys expire.")
        answer = _thread(
            store,
            "s-2",
            "User: How long do failed jobs stay before the queue throws them away?\n"
            "Assistant: Failed jobs stay 7 days (removeOnFail age 604800), then the queue "
            "throws them away.",
        )
        for i in range(5):
            _thread(store, f"s-{3 + i}", f"User: worker {i} restarted.\nAssistant: jobs resumed.")
        found = _ask_thread(
            store, "How long do failed jobs stay in Redis before the queue throws them away?"
        )
        assert found[0] == answer


def test_within_one_project_the_named_sessions_lead_without_burying_the_answer(
    tmp_path: Path,
) -> None:
    """One project's sessions continue one thread: the session that names Marta goes before
    the others, but not before the answer elsewhere that holds the question's other words
    (a session holding little of the question loses ground too, `coherence`)."""
    with MemoryStore(tmp_path / "m.db") as store:
        _thread(store, "s-1", "User: Marta joined this week.\nAssistant: Welcome her.")
        for i in range(6):
            _thread(store, "s-1", f"User: Marta asked about lunch {i}.\nAssistant: At {i}.")
        answer = _thread(
            store,
            "s-2",
            "User: Which cache do we put in front of the storefront, and what hit rate did "
            "the cache benchmark give?\nAssistant: The storefront cache is Varnish; the "
            "cache benchmark gave a 94% hit rate.",
        )
        for i in range(4):
            _thread(store, f"s-{3 + i}", f"User: deploy {i}.\nAssistant: storefront green.")
        found = _ask_thread(
            store,
            "Which cache did Marta's team put in front of the storefront, and what hit rate "
            "did the benchmark give?",
        )
        sessions = [store.get(f)["session_id"] for f in found]
        assert found[0] == answer
        assert sessions[1:8] == ["s-1"] * 7  # Marta's session before the other sessions
