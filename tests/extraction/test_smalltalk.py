"""Small talk is never a memory (issue 20): pleasantries, compliments, offers of help and
thanks that happen to match a rule's or a fact's shape ("Always here to help.") are
dropped, whoever says them; statements that merely open with a pleasantry still count."""

from __future__ import annotations

import pytest

from llmem_hooks.events import Message
from llmem_hooks.extraction.heuristics import HeuristicExtractor
from llmem_hooks.extraction.smalltalk import has_substance, is_small_talk

SMALL_TALK = [
    # offers of help
    "Always here to help.",
    "I'm always happy to help!",
    "Let me know if you need anything else.",
    "Feel free to reach out anytime.",
    "Anything else I can help you with?",
    # compliments to the other speaker
    "You're worth it too.",
    "You are truly amazing, Tomas!",
    "That's a great question.",
    "Great job on this!",
    # thanks and acknowledgements
    "Thank you so much for your help.",
    "You're welcome, always a pleasure.",
    "Sounds good, thanks!",
    # greetings, well-wishes, phatic questions
    "hello there",
    "Hey Nadia!",
    "Good morning everyone :)",
    "Have a great weekend!",
    "How are you doing?",
    "Hi! How can I help you today?",
]

STATEMENTS = [
    ("Always use uv for installs.", "preference"),
    ("Always run make test before pushing.", "procedure"),
    ("Thanks, and remember that the staging deploy needs a VPN.", "fact"),
    ("We decided to use Postgres for the ledger.", "decision"),
    ("Never commit to main directly.", "procedure"),
]


@pytest.mark.parametrize("sentence", SMALL_TALK)
@pytest.mark.parametrize("role", ["user", "assistant"])
def test_small_talk_never_becomes_a_memory(sentence: str, role: str) -> None:
    assert is_small_talk(sentence)
    for text in (sentence, f"Remember: {sentence}", f"{sentence} Remember that."):
        msg = Message("m1", "s", role, text, 1)
        got = HeuristicExtractor().extract_staged([msg])
        assert got.memories == [] and got.inbox == [], (text, got)


@pytest.mark.parametrize(("sentence", "kind"), STATEMENTS)
def test_statements_still_count(sentence: str, kind: str) -> None:
    assert not is_small_talk(sentence)
    got = HeuristicExtractor().extract_staged([Message("m1", "s", "user", sentence, 1)])
    assert [c.type for c in got.memories] == [kind]


@pytest.mark.parametrize(
    "sentence",
    [
        "Let me know when the migration finishes on staging.",
        "Great, so we use Redis for sessions.",
        "You're right that the port is 5432.",
        "Have the CI run on every push.",
        "Thanks, the deploy uses `make ship`.",
    ],
)
def test_a_pleasantry_around_content_is_not_small_talk(sentence: str) -> None:
    assert not is_small_talk(sentence)


@pytest.mark.parametrize(
    ("exchange", "kept"),
    [
        ("User: hello there\nAssistant: Hello! How can I help you today?", False),
        ("User: thanks!\nAssistant: You're welcome, always here to help.", False),
        ("User: what's 2 + 2?\nAssistant: 4, of course!", False),
        ("User: ok, is it cold today?\nAssistant: No idea, sorry.", False),
        ("User: run the tests\nAssistant: [bash] pytest -q", True),
        ("User: hi, what port does the API listen on?\nAssistant: 8080.", True),
        ("User: hey\nAssistant: The build failed again.", True),
        ("User: ping\nAssistant: Deployments go through Argo now.", True),
        (
            "User: why is the sky blue?\nAssistant: Shorter wavelengths scatter more in the"
            " atmosphere, so blue light reaches your eyes from every direction of the sky.",
            True,
        ),
    ],
)
def test_substance_is_decided_by_content(exchange: str, kept: bool) -> None:
    assert has_substance(exchange) is kept


def test_a_durable_statement_is_substance_even_without_identifiers() -> None:
    text = "User: let's use postgres for the ledger\nAssistant: Okay."
    assert not has_substance(text)
    assert has_substance(text, statements=1)


def test_a_wall_of_pleasantries_is_read_as_content_and_quickly() -> None:
    """Over 300 characters a sentence is not small talk (the bound also keeps the
    patterns cheap on pasted text)."""
    assert not is_small_talk("thanks " * 20_000)
    assert is_small_talk("thanks " * 10)
