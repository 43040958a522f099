"""Query-focused passages: a long result shows the lines that answer, within a budget;
ranking and the stored text are untouched, and the whole text is one command away."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmem_hooks import MemoryStore
from llmem_hooks.cli import main
from llmem_hooks.search.passages import ELLIPSIS, WHOLE_CHARS, excerpt, fit
from llmem_hooks.text.query import parse_query

FILLER = [
    f"Line {i}: we looked at the logging output and nothing stood out there." for i in range(30)
]


def episode(answer_at: int, answer: str, cue: str = "") -> str:
    lines = list(FILLER)
    if cue:
        lines.insert(answer_at - 1, cue)
    lines.insert(answer_at, answer)
    return "User: why is the cache slow?\nAssistant: " + "\n".join(lines)


def test_short_text_is_shown_whole() -> None:
    text = "Use uv, not pip, in this repo."
    assert len(text) <= WHOLE_CHARS
    assert fit([text], ["pip"], 10) == [text]
    assert excerpt(text, ["nothing"], 5) == text


def test_budget_zero_keeps_everything_whole() -> None:
    long = episode(20, "The Redis pool was exhausted; max_connections=50 fixed it.")
    assert fit([long, long], ["redis"], 0) == [long, long]


def test_the_matching_line_and_the_one_after_it_are_shown() -> None:
    text = episode(
        20,
        "The Redis connection pool was exhausted under load.",
        cue="",
    ).replace(
        "The Redis connection pool was exhausted under load.",
        "The Redis connection pool was exhausted under load.\n"
        "Set max_connections=50 and socket_timeout=5 on the pool.",
    )
    shown = excerpt(text, ["redis", "pool", "exhausted"], 300)
    assert "Redis connection pool was exhausted" in shown
    assert "max_connections=50" in shown  # the line after the cue: where answers are
    assert len(shown) <= 300 + 10
    assert shown.startswith(ELLIPSIS) and shown.endswith(ELLIPSIS)  # cut at both ends


def test_a_cue_ending_in_a_colon_brings_the_list_after_it() -> None:
    text = episode(15, "- `ProductCreate`: name, price", cue="Pydantic schemas:").replace(
        "- `ProductCreate`: name, price",
        "- `ProductCreate`: name, price\n- `ProductUpdate`: all optional\n"
        "- `ProductResponse`: with id",
    )
    shown = excerpt(text, ["pydantic", "schemas"], 400)
    for name in ("ProductCreate", "ProductUpdate", "ProductResponse"):
        assert name in shown


def test_inflections_count_as_matches() -> None:
    text = episode(10, "We deployed it with a rolling restart behind nginx.")
    assert "rolling restart" in excerpt(text, ["deploy"], 200)


def test_document_order_is_kept_and_gaps_are_marked() -> None:
    text = "\n".join(
        ["alpha first line about nothing much at all"] * 5
        + ["the zebra crossing was repainted"]
        + ["beta middle line about nothing much at all"] * 10
        + ["the zebra migration finished"]
        + ["gamma last line about nothing much at all"] * 5
    )
    shown = excerpt(text, ["zebra"], 200)
    assert shown.index("repainted") < shown.index("migration")
    assert f" {ELLIPSIS}\n" in shown  # the lines between were left out


def test_nothing_matched_shows_the_opening() -> None:
    text = episode(20, "irrelevant")
    shown = excerpt(text, ["kubernetes"], 150)
    assert shown.startswith("User: why is the cache slow?")


def test_the_budget_is_shared_by_the_list_and_every_result_shows_something() -> None:
    texts = [
        episode(5 + 3 * i, f"Answer {i}: the flaky test was the clock skew {i}.") for i in range(5)
    ]
    shown = fit(texts, ["flaky", "clock", "skew"], 1000)
    assert all(f"Answer {i}" in s for i, s in enumerate(shown))
    assert sum(len(s) for s in shown) <= 1000 + 5 * 80  # forced best lines may overshoot a little
    assert sum(len(s) for s in shown) < sum(len(t) for t in texts) / 3


def test_each_result_shows_its_best_line_and_with_room_every_text_is_whole() -> None:
    same = "Decision: the billing service moves to Postgres 16 in March."
    a = episode(10, same)
    b = episode(12, same)
    shown = fit([a, b], ["billing", "postgres"], 600)
    assert same in shown[0] and same in shown[1]  # each result shows its best line...
    widened = fit([a, b], ["billing", "postgres"], 5000)
    assert widened[0] == a  # ... and with room, texts are shown whole


@pytest.fixture
def long_episode(llmem_home: Path) -> str:
    with MemoryStore(llmem_home / "memory.db") as st:
        mem_id = st.add(
            "conversation",
            episode(
                25,
                "The Stripe webhook failed because the body was decoded before "
                "construct_event read the raw bytes.",
            ),
            dedupe=False,
        )
    return mem_id


def test_search_shows_the_passage_and_full_shows_the_whole(
    long_episode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["search", "why did the stripe webhook fail?", "--json"]) == 0
    hit = json.loads(capsys.readouterr().out)[0]
    assert hit["excerpt"] is True
    assert "construct_event" in hit["content"]
    assert len(hit["content"]) < hit["content_chars"]
    assert main(["search", "why did the stripe webhook fail?", "--json", "--full"]) == 0
    whole = json.loads(capsys.readouterr().out)[0]
    assert "excerpt" not in whole and len(whole["content"]) == hit["content_chars"]
    assert main(["show", hit["id"], "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["content"] == whole["content"]


def test_passage_chars_zero_in_config_shows_results_whole(
    long_episode: str, llmem_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (llmem_home / "config.yaml").write_text("retrieval:\n  passage_chars: 0\n")
    assert main(["search", "stripe webhook", "--json"]) == 0
    assert "excerpt" not in json.loads(capsys.readouterr().out)[0]


def test_a_run_on_sentence_longer_than_the_budget_is_cut_inside() -> None:
    """One 2,600-character sentence (no line breaks, no sentence ends) used to be one unit:
    a result's best unit is always shown, so the list ran far past its budget. It is cut
    at word boundaries; the piece holding the answer is shown, within the budget."""
    filler = "and then we looked at the other dashboards again while the build kept running "
    answer = "the ledger database finally moved to port 6543 on the staging cluster "
    run_on = filler * 16 + answer + filler * 16
    assert "." not in run_on and len(run_on) > 2500
    shown = fit([run_on, "short note about ports"], ["ledger", "port"], 600)
    assert sum(len(s) for s in shown) <= 600 + 2 * len(ELLIPSIS) + 4
    assert "port 6543" in shown[0] and shown[1] == "short note about ports"


def test_a_word_longer_than_a_unit_is_cut_inside_it() -> None:
    blob = "token=" + "x" * 1000 + " the deploy key lives in vault"
    (shown,) = fit([blob], ["deploy", "vault"], 400)
    assert len(shown) <= 400 + 2 * len(ELLIPSIS) + 4
    assert "deploy key lives in vault" in shown


def test_the_first_three_results_get_the_budget_first() -> None:
    """The first three results are read first: they share the budget less a small reserve
    for each later one, which then share what the first three leave (issue 23)."""

    def doc(i: int) -> str:  # filler of its own (not the list's repeated lines)
        lines = [f"Line {k}: module m{i}x{k} wrote r{i}y{k} rows to t{i}z{k}." for k in range(30)]
        lines.insert(5 + 3 * i, f"Answer {i}: the flaky test was the clock skew {i}.")
        return "\n".join(lines)

    texts = [doc(i) for i in range(5)]
    terms = ["flaky", "clock", "skew"]
    shown = fit(texts, terms, 1500)
    assert all(f"Answer {i}" in s for i, s in enumerate(shown))  # each its best line
    head, tail = [len(s) for s in shown[:3]], [len(s) for s in shown[3:]]
    assert min(head) > max(tail) and max(tail) <= 200
    assert sum(head) + sum(tail) <= 1500 + 80
    # First three short: the later ones share what they leave.
    short = ["Answer: the flaky test was the clock skew."] * 3 + texts[3:]
    shown = fit(short, terms, 1500)
    assert shown[:3] == short[:3] and min(len(s) for s in shown[3:]) > 400
    # A budget too small to keep a reserve: one list, as before.
    assert all(f"Answer {i}" in s for i, s in enumerate(fit(texts, terms, 300)))


def test_a_question_about_a_quantity_is_shown_the_line_with_the_number() -> None:
    """ "How big is the Docker image?" is answered by "the image drops from 1.2GB to
    340MB", which holds fewer of its words than the lines around it. A digit now counts as
    one of a quantity question's words (`parse_query(...).asks_quantity`)."""
    lines = [f"The docker image build step {w} runs in the docker stage." for w in "abcdefghij"]
    lines.insert(7, "With the slim base the image drops from 1.2GB to 340MB.")
    text = "User: the docker image is huge\nAssistant: " + "\n".join(lines)
    terms = parse_query("how big is the docker image now?").terms
    assert parse_query("how big is the docker image now?").asks_quantity
    assert not parse_query("why is the docker image slow to build?").asks_quantity
    assert "340MB" not in fit([text], terms, 250)[0]
    assert "340MB" in fit([text], terms, 250, numbers=True)[0]


STATUS = "\n".join(
    [
        "User: final status check, where is the api?",
        "Assistant: Here is where it stands.",
        *[f"Filler line {i} about the weather and the coffee machine upstairs." for i in range(8)],
        "**Complete:**",
        "- Auth (JWT + httpOnly cookies + refresh rotation)",
        "- Product catalog (CRUD, filtering, soft delete, admin-only write)",
        "- Shopping cart (Redis hash, 7-day TTL)",
        "- Email (SendGrid, fire-and-forget via asyncio.create_task)",
        "- Rate limiting (slowapi, 100/10 rpm, Redis backend, X-RateLimit-* headers)",
        "- Logging (structlog, UUID request_id, JSON in prod, LOG_LEVEL env var)",
        "- API versioning (/api/v1/ prefix, Deprecation header, 30-day window)",
        "- Deployment (340MB Docker, nginx, GET /health, zero-downtime rolling restart)",
        "- **Pending: NextAuth.js authentication, admin views**",
        *[f"Closing remark {i} on lunch plans and the office plants." for i in range(8)],
    ]
)


def test_a_list_shows_the_heads_of_its_other_items() -> None:
    """ "What is complete?" matches the cue line of a status list and none of its items:
    the items' heads ("- Logging …") show what the list names, for a fraction of its
    length; an item the budget then reaches is shown whole, never twice."""
    shown = fit([STATUS], ["complete"], 330)[0]
    assert len(shown) <= 330 + 10
    for head in ("Auth", "Product catalog", "Shopping cart", "Email", "Rate limiting"):
        assert f"- {head}" in shown
    lines = {line.split(" (")[0]: line for line in shown.splitlines()}
    for head in ("- Logging", "- API versioning", "- Deployment"):
        assert lines[head].endswith(f" {ELLIPSIS}")  # a head, marked as cut
    assert "- **Pending: NextAuth.js" in shown  # a label keeps what follows it
    assert "- Logging (structlog" in shown  # an aside's first part: what it is made of
    assert "request_id" not in shown and "zero-downtime" not in shown  # the rest is cut
    assert f"{ELLIPSIS} {ELLIPSIS}" not in shown  # one mark where text was left out
    # More room: the items are shown whole, each once.
    roomy = fit([STATUS], ["complete"], 900)[0]
    assert "- Logging (structlog, UUID request_id" in roomy
    assert roomy.count("Logging") == 1 and roomy.count("Deployment") == 1


def test_a_head_is_the_words_before_the_first_aside() -> None:
    from llmem_hooks.search.passages import _head

    assert _head("- Rate limiting (slowapi, 100/10 rpm)") == "- Rate limiting (slowapi"
    assert _head("1. Read cart from Redis (`cart:{user_id}`)") == "1. Read cart from Redis (`cart"
    assert _head("- Shopping cart, with a 7-day TTL") == "- Shopping cart"
    assert _head("- `AreaChart` — revenue over time") == "- `AreaChart`"
    assert _head("- Pending: NextAuth.js, admin views") == "- Pending: NextAuth.js"
    for not_a_head in ("-", "- ", "- short", "-- not a list", "-1 degrees", "2024. a year"):
        assert _head(not_a_head) is None  # not an item, or nothing worth cutting
    long = "- " + "word " * 40
    head = _head(long)
    assert head is not None and len(head) <= 64
