"""Heuristic extraction: what becomes a memory, what must not, and what never leaks."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from llmem_hooks import MemoryStore
from llmem_hooks.events import Message
from llmem_hooks.extraction.candidates import Candidate, auto_tags
from llmem_hooks.extraction.engine import ExtractionEngine
from llmem_hooks.extraction.heuristics import HeuristicExtractor
from llmem_hooks.extraction.summary import self_assessment, session_goal, summarize_session
from llmem_hooks.extraction.transcript import transcript_lines
from llmem_hooks.redact import redact_secrets, strip_private
from llmem_hooks.registry import DEFAULT_MEMORY_TYPES
from llmem_hooks.store import MAX_CONTENT_CHARS

TAG_RE = re.compile(r"^[a-z0-9][a-z0-9_.:/+#-]{0,63}$")
GITHUB_TOKEN = "ghp_" + "A1b2C3d4E5" * 4  # 40 characters after the prefix
AWS_KEY = "AKIA" + "IOSFODNN7EXAMPLE"


def user(text: str, mid: str = "msg_1") -> Message:
    return Message(mid, "ses_1", "user", f"User: {text}")


def assistant(text: str, mid: str = "msg_2", **kw: tuple[str, ...]) -> Message:
    return Message(mid, "ses_1", "assistant", f"Assistant: {text}", **kw)  # type: ignore[arg-type]


def extract(*messages: Message) -> list[Candidate]:
    return ExtractionEngine().extract(messages, project="proj")


def only(messages: Sequence[Message] | Message) -> Candidate:
    msgs = [messages] if isinstance(messages, Message) else list(messages)
    found = extract(*msgs)
    assert len(found) == 1, found
    return found[0]


# (text, type, content, scope): user messages that state a memory on purpose.
POSITIVES = [
    # explicit "remember" forms: 0.9
    (
        "remember that we deploy with blue-green releases",
        "fact",
        "We deploy with blue-green releases.",
    ),
    ("Please remember that the staging DB is read-only", "fact", "The staging DB is read-only."),
    (
        "don't forget that the API rate limit is 100 requests per second",
        "fact",
        "The API rate limit is 100 requests per second.",
    ),
    (
        "don't forget to run migrations after pulling main",
        "procedure",
        "Run migrations after pulling main.",
    ),
    (
        "Remember: integration tests need Docker running",
        "fact",
        "Integration tests need Docker running.",
    ),
    (
        "keep in mind that prod runs Postgres 15, not 16",
        "fact",
        "Prod runs Postgres 15, not 16.",
    ),
    ("Can you remember that our docs live in docs/site?", "fact", "Our docs live in docs/site."),
    (
        "REMEMBER: the VPN must be on for the staging cluster",
        "fact",
        "The VPN must be on for the staging cluster.",
    ),
    (
        "Thanks! Also, please remember that feature flags live in LaunchDarkly.",
        "fact",
        "Feature flags live in LaunchDarkly.",
    ),
    ("remember that test data lives in fixtures/", "fact", "Test data lives in fixtures/."),
    ("remember that I prefer tabs over spaces", "preference", "User prefers tabs over spaces."),
    ("**Remember:** the prod DB is in eu-west-1", "fact", "The prod DB is in eu-west-1."),
    # always / never rules: 0.8
    (
        "always run `ruff format` before committing",
        "procedure",
        "Always run `ruff format` before committing.",
    ),
    ("Never push directly to main.", "procedure", "Never push directly to main."),
    ("Never use emojis in commit messages", "preference", "Never use emojis in commit messages."),
    ("We always squash-merge pull requests", "procedure", "We always squash-merge pull requests."),
    (
        "You should always pin Docker base images by digest",
        "procedure",
        "Always pin Docker base images by digest.",
    ),
    # decisions: 0.85
    (
        "we decided to use Redis streams for the job queue",
        "decision",
        "We decided to use Redis streams for the job queue.",
    ),
    (
        "We've agreed that all timestamps are stored in UTC",
        "decision",
        "We've agreed that all timestamps are stored in UTC.",
    ),
    (
        "Decision: use httpx instead of requests for HTTP calls",
        "decision",
        "Use httpx instead of requests for HTTP calls.",
    ),
    (
        "let's go with SQLite for the first release",
        "decision",
        "Let's go with SQLite for the first release.",
    ),
    ("We'll use pnpm instead of npm", "decision", "We'll use pnpm instead of npm."),
    ("ok so we're going with Kubernetes on GKE", "decision", "We're going with Kubernetes on GKE."),
    ("we settled on Terraform for infra", "decision", "We settled on Terraform for infra."),
    ("Decided: we'll keep the monorepo", "decision", "We'll keep the monorepo."),
    # preferences: 0.8, global
    (
        "I prefer pytest fixtures over setUp methods",
        "preference",
        "User prefers pytest fixtures over setUp methods.",
    ),
    (
        "I'd rather use plain SQL than an ORM",
        "preference",
        "User would rather use plain SQL than an ORM.",
    ),
    (
        "I like small focused commits better than big ones",
        "preference",
        "User likes small focused commits better than big ones.",
    ),
    (
        "I'd prefer not to use mocks in integration tests",
        "preference",
        "User prefers not to use mocks in integration tests.",
    ),
    # how-tos around an explicit command: 0.8
    (
        "the command to reset the dev database is `make db-reset`",
        "procedure",
        "The command to reset the dev database is `make db-reset`.",
    ),
    (
        "To run the e2e suite, run `npm run test:e2e`",
        "procedure",
        "To run the e2e suite, run `npm run test:e2e`.",
    ),
    (
        "Run `docker compose up -d db` before starting the API",
        "procedure",
        "Run `docker compose up -d db` before starting the API.",
    ),
    (
        "the deploy command is `./scripts/deploy.sh prod`",
        "procedure",
        "The deploy command is `./scripts/deploy.sh prod`.",
    ),
]
CONFIDENCE = {"decision": 0.85}


@pytest.mark.parametrize(("text", "kind", "content"), POSITIVES)
def test_positive(text: str, kind: str, content: str) -> None:
    cand = only(user(text, "msg_7"))
    assert (cand.type, cand.content) == (kind, content)
    assert cand.scope == ("global" if kind == "preference" else "project")
    assert cand.source_message_ids == ["msg_7"]
    assert kind in cand.tags
    explicit = re.search(r"(?i)remember|forget|keep in mind", text)
    expected = 0.9 if explicit else CONFIDENCE.get(kind, 0.8)
    assert cand.confidence == expected


# Look-alikes: questions, hypotheticals, negations, stories, vague references, tasks.
NEGATIVES = [
    "should we always use docker for local dev?",
    "Do we always need to rebuild the image",
    "if we decided to drop MySQL, the migration would be painful",
    "we never decided on the cache eviction policy",
    "We haven't decided on the queue yet.",
    "Do you remember what port the API uses?",
    "I don't remember the staging password policy",
    "Remember when the deploy broke prod last week",
    "TODO: always run the migrations in a transaction",
    "Never mind, it works now.",
    "Always fails on CI with a timeout",
    "It is not always the case that tests are flaky",
    "I never said we should use Kafka",
    "I prefer it this way",
    "Which do you prefer, tabs or spaces?",
    "I'd rather not.",
    "let's go with it",
    "Let's go check the logs first",
    "run the tests",
    "run `npm test` to see if it passes",
    "Can you run `make lint` to check the formatting?",
    "We decided?",
    "Should we go with Postgres?",
    "What if we always deploy on Fridays?",
    "Maybe we'll use Redis instead of Memcached",
    "We always deployed on Fridays back then.",
    "```\nalways run this as root\n```",
    "> we decided to use MongoDB",
    "- [ ] always add tests",
    "The command is failing with exit code 2",
    "the command is `npm start`",
    "You never know with flaky tests",
    "we always seem to break the build on Mondays",
    "I like that better",
    "let's go with option B",
    "Remember that",
    "please remember",
    "Always.",
    "we decided nothing yet",
    "we'll use it instead of the old one",
    "if you remember that we deploy on fridays, skip the release",
    "Fix the flaky login test",
    "I'd like to use the new API",
    "we're going with whatever you think is best",
    '"we decided to use X" is what the ticket says',
    "run `pytest` again to confirm",
    "Always the same error with the cache",
    "we never got the VPN working",
    "They decided to use Go",
]


@pytest.mark.parametrize("text", NEGATIVES)
def test_look_alike_is_not_a_memory(text: str) -> None:
    assert extract(user(text)) == []


@pytest.mark.parametrize(
    "text",
    [
        "I'll remember that we deploy with blue-green releases.",
        "We decided to use Redis.",
        "You should always pin the base image.",
        "I prefer small commits over big ones.",
    ],
)
def test_an_assistant_saying_it_is_not_a_memory(text: str) -> None:
    assert extract(assistant(text)) == []


def test_assistant_remember_notes_and_decision_labels_count() -> None:
    msg = assistant(
        "Done.\n*Remember*: the test DB must be reset with `make db-reset`\n"
        "before running the suite. Is that clear?\n\nOther notes.\n"
        "**Remember**: restart the worker after changing celery config\n"
        "Decision: keep the retry budget at three attempts"
    )
    found = [(c.type, c.content, c.confidence) for c in extract(msg)]
    assert found == [
        (
            "fact",
            "The test DB must be reset with `make db-reset` before running the suite.",
            0.9,
        ),
        ("procedure", "Restart the worker after changing celery config.", 0.9),
        ("decision", "Keep the retry budget at three attempts.", 0.85),
    ]


def test_tool_output_reasoning_and_patches_are_ignored() -> None:
    # Markers on lines of their own, with printed tool output under them.
    msg = assistant(
        "Looking.\nReasoning: remember that the user prefers tabs\nTool: bash\n"
        "remember that this came from a file\nPatch\n+# Remember: never commit this\n"
        "Assistant: All set."
    )
    assert extract(msg) == []
    kinds = [line.kind for line in transcript_lines(msg)]
    assert kinds == ["speech", "reasoning", "tool", "tool", "patch", "patch", "speech"]


def test_opencode_transcript_form() -> None:
    # Markers right after the speaker, as the OpenCode adapter writes them.
    msg = Message(
        "m1",
        "s",
        "user",
        "User: Reasoning: remember that reasoning is not a user statement\n"
        "User: Tool: bash: echo 'remember that tool input is not one either'\n"
        "User: Patch: src/a.py\n"
        "User: Error: remember that errors are not statements\n"
        "User: remember that the worker pool size is eight\n"
        "and this line continues the text part",
    )
    assert [c.content for c in extract(msg)] == ["The worker pool size is eight."]
    kinds = [line.kind for line in transcript_lines(msg)]
    assert kinds == ["reasoning", "tool", "patch", "error", "speech", "speech"]


def test_several_memories_in_one_message_and_dedupe_across_messages() -> None:
    first = user(
        "Fix the login bug.\nremember that the login test needs a seeded Redis\n"
        "Also we decided to use argon2 for hashing. Thanks!",
        "msg_1",
    )
    second = user("Remember that the login test needs a seeded redis!", "msg_9")
    found = extract(first, second)
    assert [(c.type, c.content) for c in found] == [
        ("fact", "The login test needs a seeded Redis."),
        ("decision", "We decided to use argon2 for hashing."),
    ]
    assert found[0].source_message_ids == ["msg_1", "msg_9"]


def test_content_is_capped_at_the_store_limit() -> None:
    long_fact = "remember that " + " ".join(f"word{i}" for i in range(3000))
    (cand,) = extract(user(long_fact))
    assert len(cand.content) <= MAX_CONTENT_CHARS and cand.content.endswith("...")


def test_tags_are_valid_keywords() -> None:
    assert auto_tags("Run `docker compose up` before pytest on Postgres", "procedure") == [
        "docker",
        "postgres",
        "pytest",
        "testing",
        "procedure",
    ]
    assert auto_tags("Nothing technical here at all", "fact") == ["fact"]


def test_candidates_are_accepted_by_a_real_store(tmp_path: Path) -> None:
    found = extract(*(user(text, f"msg_{i}") for i, (text, _, _) in enumerate(POSITIVES)))
    assert len(found) == len(POSITIVES)
    with MemoryStore(tmp_path / "m.db") as store:
        for cand in found:
            assert cand.type in DEFAULT_MEMORY_TYPES
            assert cand.tags and all(TAG_RE.match(t) for t in cand.tags)
            store.add(
                cand.type,
                cand.content,
                confidence=cand.confidence,
                tags=cand.tags,
                source="extract",
                project="proj" if cand.scope == "project" else None,
                session_id="ses_1",
                source_message_ids=cand.source_message_ids,
            )
        assert store.count() == len(found)
        stored = store.list_all(type="preference", limit=50)
        assert all(m["project"] is None for m in stored)


# -- privacy ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a <private>b</private> c", "a   c"),
        ("a <PRIVATE>multi\nline</Private > c", "a   c"),
        ("keep <private>drop this and everything after", "keep "),
        ("lost opening</private> kept", " kept"),
        ("x <private>1</private> y <private>2</private> z", "x   y   z"),
        ("no tags at all", "no tags at all"),
    ],
)
def test_strip_private(text: str, expected: str) -> None:
    assert strip_private(text) == expected


def test_private_spans_never_become_memories() -> None:
    msgs = [
        user("<private>remember that the vault root token lives in 1password</private> ok"),
        user("remember that staging uses the eu cluster <private> remember that prod is x"),
        user("we decided to use the old vendor</private> remember that CI runs on arm64"),
    ]
    assert [c.content for c in extract(*msgs)] == [
        "Staging uses the eu cluster.",
        "CI runs on arm64.",
    ]


def test_secrets_are_redacted_or_dropped() -> None:
    msgs = [
        user(f"remember that the CI bot uses {GITHUB_TOKEN} to push release tags"),
        user("remember that we clone from https://bob:s3cretpw@git.example.com/r.git for mirrors"),
        user("remember that password=hunter2hunter2 is used for the staging deploy database"),
        user(f"remember that {AWS_KEY} is the key"),  # nothing meaningful left: dropped
        user("remember that the admin password is hunter2hunter2"),  # dropped too
        user("remember that -----BEGIN RSA PRIVATE KEY----- opens the deploy key for prod"),
    ]
    contents = [c.content for c in extract(*msgs)]
    assert contents == [
        "The CI bot uses [REDACTED] to push release tags.",
        "We clone from https://[REDACTED]@git.example.com/r.git for mirrors.",
        "Password=[REDACTED] is used for the staging deploy database.",
    ]
    joined = " ".join(contents)
    assert GITHUB_TOKEN not in joined and "s3cretpw" not in joined and "hunter2" not in joined


def test_redact_secrets_keeps_ordinary_prose() -> None:
    assert redact_secrets("the token is expired and the password is stored in vault") == (
        "the token is expired and the password is stored in vault"
    )
    assert redact_secrets("the password is x9-k!k2.") == "the password is [REDACTED]."
    assert redact_secrets("-----BEGIN PRIVATE KEY-----\nMIIE") is None


# -- engine -------------------------------------------------------------------------------


class BrokenModel:
    def extract(self, messages: Sequence[Message], *, project: str | None = None) -> list:
        raise ConnectionError("ollama is not running")


class SloppyModel:
    """What an LLM might return: unknown types, bad tags, secrets, duplicates."""

    def extract(
        self, messages: Sequence[Message], *, project: str | None = None
    ) -> list[Candidate]:
        return [
            Candidate("fact", "The deploy bot token is " + GITHUB_TOKEN, 0.9),
            Candidate("hunch", "This is not a registered memory type at all", 0.5),
            Candidate("decision", "Use httpx for all HTTP calls", 1.7, ["Bad Tag!", "HTTP"]),
            Candidate("decision", "use  HTTPX for all http calls.", 0.6, [], "global", ["m2"]),
            Candidate("fact", None, 0.9),  # type: ignore[arg-type]
            Candidate("fact", "Confidence that is not a number at all", "high"),  # type: ignore[arg-type]
        ]


def test_engine_falls_back_to_heuristics_when_the_model_fails() -> None:
    engine = ExtractionEngine(BrokenModel())
    found = engine.extract([user("remember that builds run on arm64 runners")], project=None)
    assert [c.content for c in found] == ["Builds run on arm64 runners."]
    assert engine.check_available()


def test_engine_gates_whatever_the_extractor_returns() -> None:
    found = ExtractionEngine(SloppyModel()).extract([], project="p")
    assert len(found) == 1
    (cand,) = found
    assert cand.content == "Use httpx for all HTTP calls"
    assert cand.confidence == 1.0 and cand.source_message_ids == ["m2"]
    assert cand.tags == ["http", "api", "decision"]


def test_extraction_is_deterministic() -> None:
    msgs = [user(text, f"msg_{i}") for i, (text, _, _) in enumerate(POSITIVES)]
    assert HeuristicExtractor().extract(msgs) == HeuristicExtractor().extract(list(msgs))


# -- summary and self-assessment ----------------------------------------------------------


def session() -> list[Message]:
    return [
        user("hi", "m1"),
        Message(
            "m2",
            "ses_1",
            "user",
            "User: Please add retries to the HTTP client <private>for the acme deal</private>",
            files=("api/client.py",),
            commands=("pytest -q",),
        ),
        assistant(
            "Running the tests.\nAssistant: Tool: bash: pytest -q [error]\n"
            "Assistant: Tool: edit: api/client.py\nAssistant: Tool: bash: pytest -q\n"
            "Assistant: Fixed.",
            "m3",
            files=("api/client.py", "tests/test_x.py"),
            commands=("pytest -q", f"git push https://x:{GITHUB_TOKEN}@github.com/o/r"),
        ),
    ]


def test_session_goal_skips_small_talk() -> None:
    assert session_goal(session()) == "Please add retries to the HTTP client"
    assert session_goal([user("ok"), user("/init")]) == ""


def test_summarize_session() -> None:
    text = summarize_session(session())
    assert text.startswith("Session summary. Goal: Please add retries to the HTTP client.")
    assert "2 user turns, 1 assistant reply" in text
    assert "2 files touched: api/client.py, tests/test_x.py" in text
    assert "2 commands run: pytest -q, git push https://[REDACTED]@github.com/o/r" in text
    assert "acme" not in text and GITHUB_TOKEN not in text
    many = [Message(f"m{i}", "s", "user", f"User: step {i} " + "x" * 200) for i in range(40)]
    assert len(summarize_session(many)) <= 600


def test_self_assessment_is_counts_only() -> None:
    text = self_assessment(session())
    assert text == (
        "Session self-assessment (heuristic): 2 turns, 1 tool error seen, files touched: "
        "api/client.py, tests/test_x.py, outcome: completed."
    )
    # Printed tool output (other transcript forms): error lines mark the call as failed.
    printed = Message(
        "m",
        "s",
        "assistant",
        "Tool: bash\nFAILED tests/test_x.py::test_a - AssertionError\n1 failed, 3 passed\n"
        "Tool: bash\n5 passed, 0 failed\nTool: bash\nTraceback (most recent call last):",
    )
    text = self_assessment([user("Deploy it"), printed])
    assert text.startswith("Session self-assessment (heuristic): 1 turn, 2 tool errors seen")
    assert text.endswith("outcome: unclear.")
    model_failed = Message("m", "s", "assistant", "Assistant: Error: rate limited")
    assert self_assessment([user("Deploy it"), model_failed]).endswith(
        "1 tool error seen, files touched: none, outcome: unclear."
    )
    clean = [user("Add a README section"), assistant("Added.", files=("README.md",))]
    assert self_assessment(clean).endswith("files touched: README.md, outcome: completed.")
    assert self_assessment([user("Add a README section")]).endswith("outcome: unclear.")
    assert self_assessment([]) == ""


# -- the package and its protocols --------------------------------------------------------


def test_the_extraction_package_exports_what_it_lists() -> None:
    """``llmem_hooks.extraction`` re-exports lazily: every listed name resolves, and
    ``__all__`` is exactly the lazy table (the two cannot drift apart silently)."""
    import llmem_hooks.extraction as extraction

    assert set(extraction.__all__) == set(extraction._EXPORTS)
    for name in extraction.__all__:
        assert getattr(extraction, name) is not None, name
    with pytest.raises(AttributeError):
        extraction.no_such_name  # noqa: B018


def test_the_engine_and_the_extractors_satisfy_their_protocols() -> None:
    from llmem_hooks.extraction.candidates import Assessor, ReportsStatus, SessionAssessor
    from llmem_hooks.extraction.llm import ModelCaller, OllamaExtractor
    from llmem_hooks.model.ollama import OllamaClient

    engine = ExtractionEngine()
    assert isinstance(engine, SessionAssessor) and not isinstance(engine, Assessor)
    assert not isinstance(HeuristicExtractor(), Assessor | ReportsStatus)
    with OllamaClient("http://127.0.0.1:9") as client:
        model = OllamaExtractor(ModelCaller(client, "m"))
        assert isinstance(model, Assessor) and isinstance(model, ReportsStatus)


class SilentModel:
    """A model extractor that neither names itself nor reports a status."""

    def extract(
        self, messages: Sequence[Message], *, project: str | None = None
    ) -> list[Candidate]:
        return [Candidate("fact", "The staging database lives on port 5433", 0.9)]


def test_an_extractor_without_assess_degrades_to_the_counts() -> None:
    engine = ExtractionEngine(SilentModel())
    found = engine.extract([user("hello there")], project=None)
    assert [c.content for c in found] == ["The staging database lives on port 5433"]
    assert engine.last_run == "SilentModel"
    result = engine.assess_session([user("fix the flaky test"), assistant("done")])
    assert result is not None and result.assessed_by.startswith("heuristic: ")
    assert "cannot assess" in engine.last_assessment


def test_the_engine_does_not_load_the_model_client() -> None:
    """The session hooks build the engine on every idle event: without a model it must
    not import httpx or the Ollama extractor."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from llmem_hooks.extraction.engine import ExtractionEngine\n"
        "ExtractionEngine().extract([])\n"
        "print(sorted(m for m in ('httpx', 'llmem_hooks.extraction.llm') if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
