"""The resume pack: sections, what counts as an open TODO, privacy, determinism, budget."""

from __future__ import annotations

from llmem_hooks.events import Message
from llmem_hooks.session.resume import build_resume_pack

GITHUB_TOKEN = "ghp_" + "Z9y8X7w6V5" * 4


def msg(
    mid: str,
    role: str,
    text: str,
    files: tuple[str, ...] = (),
    commands: tuple[str, ...] = (),
) -> Message:
    prefix = "User" if role == "user" else "Assistant"
    return Message(mid, "ses_1", role, f"{prefix}: {text}", files=files, commands=commands)  # type: ignore[arg-type]


def session() -> list[Message]:
    return [
        msg("m1", "user", "hi"),
        msg(
            "m2",
            "user",
            "Add retries to the HTTP client.\n"
            "we decided to use tenacity instead of a hand-written loop\n"
            "TODO: document the retry policy <private>for the acme deal</private>",
        ),
        msg(
            "m3",
            "assistant",
            "Plan:\n- [ ] add tenacity dependency\n- [ ] wrap get() and post()\n"
            "- [ ] write tests\nTool: bash\nTODO: not a todo, tool output\n"
            "Assistant: Next steps:\n- update the changelog\n- bump the version\n\n"
            "We still need to decide the backoff cap. Do we still need to support py3.8?",
            files=("api/client.py", "pyproject.toml"),
            commands=("pip install tenacity", "pytest -q", "psql postgres://u:pw123456@db/app"),
        ),
        msg(
            "m4",
            "assistant",
            "- [x] add tenacity dependency\n- [x] wrap get() and post()\nDone: bump the version",
            files=("api/client.py", "tests/test_client.py"),
            commands=("pytest -q",),
        ),
        msg("m5", "user", "Decision: cap the backoff at 30 seconds"),
    ]


KEYS = [
    {"type": "procedure", "content": "Run make test before pushing", "confidence": 0.9},
    {"type": "decision", "content": "We deploy with\nblue-green releases", "confidence": 0.85},
    {"type": "decision", "content": "we deploy with blue-green releases.", "confidence": 0.8},
]

EXPECTED = """\
# Resume pack: Retries

## Goal
Add retries to the HTTP client. we decided to use tenacity instead of a hand-written loop \
TODO: document the retry policy

## Decisions
- We decided to use tenacity instead of a hand-written loop.
- Cap the backoff at 30 seconds.

## Files touched
- `pyproject.toml`
- `api/client.py`
- `tests/test_client.py`

## Commands run
- `pip install tenacity`
- `psql postgres://[REDACTED]@db/app`
- `pytest -q`

## Open TODOs
- document the retry policy
- write tests
- update the changelog
- We still need to decide the backoff cap.

## Key memories
- (procedure) Run make test before pushing
- (decision) We deploy with blue-green releases
"""


def test_full_pack() -> None:
    assert build_resume_pack(session(), KEYS, session_title="Retries") == EXPECTED


def test_deterministic() -> None:
    first = build_resume_pack(session(), KEYS, session_title="Retries")
    assert all(
        build_resume_pack(session(), list(KEYS), session_title="Retries") == first for _ in range(3)
    )


def test_empty_sections_are_left_out() -> None:
    text = build_resume_pack([msg("m1", "user", "Rename the CLI flag --db to --database")], [])
    assert text == "# Resume pack\n\n## Goal\nRename the CLI flag --db to --database\n"
    only_keys = build_resume_pack([], KEYS[:1])
    assert (
        only_keys
        == "# Resume pack\n\n## Key memories\n- (procedure) Run make test before pushing\n"
    )
    assert build_resume_pack([], []) == ""
    assert build_resume_pack([msg("m1", "user", "thanks")], [], session_title="x") == ""


def test_commands_are_deduplicated_most_recent_last_and_capped() -> None:
    cmds = tuple(f"make step{i}" for i in range(30))
    msgs = [
        msg("m1", "user", "Run all the steps", commands=cmds),
        msg("m2", "assistant", "ok", commands=("make step3", "make step29")),
    ]
    text = build_resume_pack(msgs, [])
    listed = [line for line in text.splitlines() if line.startswith("- `make")]
    assert len(listed) == 15
    assert listed[-2:] == ["- `make step3`", "- `make step29`"]
    assert "- `make step14`" not in listed and "- `make step16`" in listed


def test_commands_with_backticks_stay_inline_code() -> None:
    text = build_resume_pack([msg("m1", "user", "Go", commands=("echo `date`",))], [])
    assert "- `` echo `date` ``" in text  # CommonMark drops one padding space each side


def test_private_and_secrets_never_reach_the_pack() -> None:
    msgs = [
        msg(
            "m1",
            "user",
            f"Rotate the deploy key <private>it is in 1password under acme</private>\n"
            f"TODO: revoke {GITHUB_TOKEN} after the rotation\n"
            "remember that the vault root <private>token is s.abc123",
            files=("<private>secret-plans.md</private>", "deploy/keys.py"),
            commands=(f"gh auth login --with-token {GITHUB_TOKEN}", "aws s3 ls"),
        )
    ]
    keys = [{"type": "fact", "content": "The API key is sk-abcdefghijklmnopqrstuvwx123"}]
    text = build_resume_pack(msgs, keys)
    for leaked in ("1password", "acme", GITHUB_TOKEN, "secret-plans", "s.abc123", "sk-abc"):
        assert leaked not in text
    assert "- revoke [REDACTED] after the rotation" in text
    assert "`gh auth login --with-token [REDACTED]`" in text


def test_todos_are_closed_by_a_later_check_or_done_line() -> None:
    msgs = [
        msg("m1", "assistant", "- [ ] add the migration\n- [ ] update docs"),
        msg("m2", "assistant", "- [X] Add the migration."),
        msg("m3", "user", "TODO: ship it\nThe next step is to tag a release."),
        msg("m4", "assistant", "Done: ship it"),
    ]
    text = build_resume_pack(msgs, [])
    todos = text.split("## Open TODOs\n", 1)[1].splitlines()
    assert todos == ["- update docs", "- The next step is to tag a release."]


def test_todos_in_code_tools_and_reasoning_are_ignored() -> None:
    msgs = [
        msg("m1", "user", "Review this:\n```\n# TODO: handle errors\n- [ ] nope\n```"),
        msg(
            "m2",
            "assistant",
            "Reasoning: TODO: think harder\nAssistant: Tool: grep: TODO\n"
            "Assistant: Patch: src/todo.py",
        ),
    ]
    text = build_resume_pack(msgs, [])
    assert "## Open TODOs" not in text and "think harder" not in text


def test_cut_on_whole_lines_within_the_budget() -> None:
    full = build_resume_pack(session(), KEYS, session_title="Retries")
    assert build_resume_pack(session(), KEYS, session_title="Retries", budget_chars=40) == ""
    for budget in (200, 300, 500, len(full) - 1):
        text = build_resume_pack(session(), KEYS, session_title="Retries", budget_chars=budget)
        assert len(text) <= budget
        assert full.startswith(text)  # a prefix of whole lines, nothing rewritten
        assert text.endswith("\n") and not text.rstrip("\n").splitlines()[-1].startswith("#")
    assert build_resume_pack(session(), KEYS, budget_chars=10) == ""
    assert build_resume_pack(session(), KEYS, session_title="Retries", budget_chars=len(full)) == (
        full
    )


def test_long_lines_and_many_files_are_bounded() -> None:
    files = tuple(f"src/pkg/module_{i}.py" for i in range(100))
    msgs = [msg("m1", "user", "Refactor " + "everything " * 400, files=files)]
    text = build_resume_pack(msgs, [{"type": "fact", "content": "x " * 5000}])
    assert len(text) <= 6000
    goal = text.split("## Goal\n", 1)[1].splitlines()[0]
    assert len(goal) <= 500 and goal.endswith("...")
    assert text.count("- `src/pkg/") == 25 and "module_99.py" in text
