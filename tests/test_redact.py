"""Credential redaction: a corpus of fake secrets that must be caught and of look-alikes
(hashes, UUIDs, inline images, paths, prose) that must survive untouched."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from llmem_hooks.redact import (
    REDACTED,
    SECRET_PATTERNS,
    find_secrets,
    high_entropy_tokens,
    redact_secrets,
    strip_private,
)

FIXTURES = Path(__file__).parent / "fixtures" / "secrets"


def _lines(name: str) -> list[str]:
    text = (FIXTURES / name).read_text(encoding="utf-8")
    return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]


SECRETS = [tuple(line.split("\t", 1)) for line in _lines("secrets.txt")]
LOOKALIKES = _lines("lookalikes.txt")


def test_corpus_sizes() -> None:
    assert len(SECRETS) >= 50 and all(len(s) == 2 and s[0] in s[1] for s in SECRETS)
    assert len(LOOKALIKES) >= 50


@pytest.mark.parametrize(("value", "line"), SECRETS, ids=[s[1][:40] for s in SECRETS])
def test_secret_is_found_and_redacted(value: str, line: str) -> None:
    assert find_secrets(line), line
    redacted = redact_secrets(line)
    assert redacted is None or value not in redacted, redacted


@pytest.mark.parametrize("line", LOOKALIKES, ids=[x[:40] for x in LOOKALIKES])
def test_lookalike_survives(line: str) -> None:
    assert find_secrets(line) == []
    assert redact_secrets(line) == line


def test_redaction_keeps_the_context() -> None:
    assert redact_secrets("DB_PASSWORD=hunter2hunter2 # prod") == f"DB_PASSWORD={REDACTED} # prod"
    assert redact_secrets('{"password": "jsonFakePw_2024"}') == f'{{"password": "{REDACTED}"}}'
    assert redact_secrets("Authorization: Bearer abcFAKEbearer0123456789") == (
        f"Authorization: Bearer {REDACTED}"
    )
    assert redact_secrets("salt uT7qP2xN9vR4kL8mZ3wB6yH1jF5sD0gA here") == (f"salt {REDACTED} here")
    assert redact_secrets("postgres://app:s3cr3tPassw0rd@db:5432/app") == (
        f"postgres://{REDACTED}@db:5432/app"
    )


def test_high_entropy_tokens() -> None:
    assert high_entropy_tokens("key Q2hFakeR4nd0mK3yZx9Lm7Pq2Vt8Wc5Nb end") == [
        "Q2hFakeR4nd0mK3yZx9Lm7Pq2Vt8Wc5Nb"
    ]
    assert "high-entropy string" in find_secrets("x uT7qP2xN9vR4kL8mZ3wB6yH1jF5sD0gA")
    hexes = "3f2a9c1e7b4d8a6f0e5c2b1a9d8e7f6c5b4a3d2e 123e4567-e89b-12d3-a456-426614174000"
    assert high_entropy_tokens(hexes) == []


ADVERSARIAL_SEEDS = [
    "a", "A", "0", "aA0", "a:", "a@", "a/", "a=", "a-", "a_", "a.", " ", "+",
    "sk-", "ghp_", "github_pat_", "glpat-", "xoxb-", "AKIA", "AIza", "eyJ", "eyJa.", "SG.",
    "hf_", "npm_", "dop_v1_", "pypi-AgEIcHlwaS5vcmc", "SK", "password=", "password_",
    "a_password", "DB_", "://", "a://a:", "a://:", "Bearer ", "Authorization: Bearer ",
    "AccountKey=", '"private_key": "', "-----BEGIN ", "-----BEGIN A ", "hooks.slack.com/services/",
    "sk_live_", "data:image/png;base64,", "sha256:",
]  # fmt: skip


@pytest.mark.parametrize("seed", ADVERSARIAL_SEEDS)
def test_patterns_are_linear_on_adversarial_input(seed: str) -> None:
    text = (seed * (100_000 // len(seed) + 1))[:100_000]
    checks = [(name, pattern.search) for name, pattern in SECRET_PATTERNS]
    checks.append(("high-entropy string", high_entropy_tokens))
    for name, check in checks:
        started = time.perf_counter()
        check(text)
        elapsed = time.perf_counter() - started
        # Linear scans take ~30 ms here; a quadratic one takes minutes on 100 KB. The bound
        # is loose so a slow machine never fails it, tight enough to catch backtracking.
        assert elapsed < 1.0, f"{name} took {elapsed:.3f}s on {seed!r} * n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a <private>sk-FAKEfakeFAKEfake0123456789</private> b", "a   b"),
        ("keep <private>drop everything after, unclosed", "keep "),
        ("<private>a</private> <private>b", "  "),
        ("a <private>x <private>nested</private> still private</private> b", "a   b"),
        (
            "</private> stray closing drops what came before",
            " stray closing drops what came before",
        ),
    ],
)
def test_strip_private_fails_closed(text: str, expected: str) -> None:
    assert strip_private(text) == expected
