"""Credential redaction: a corpus of fake secrets that must be caught and of look-alikes
(hashes, UUIDs, inline images, paths, prose) that must survive untouched."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from llmem_hooks.redact import (
    CONTEXT_RULES,
    REDACTED,
    SECRET_PATTERNS,
    find_secrets,
    redact_json,
    redact_secrets,
    strip_private,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "secrets"


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
    assert redact_secrets("postgres://app:s3cr3tPassw0rd@db:5432/app") == (
        f"postgres://{REDACTED}@db:5432/app"
    )


def test_random_token_needs_a_credential_context() -> None:
    """Issue 9 defect 7: mixing case and digits is what identifiers do; only a key-like
    name or noun next to it (or a provider shape) makes a random token a secret."""
    bare = "x uT7qP2xN9vR4kL8mZ3wB6yH1jF5sD0gA y"
    assert find_secrets(bare) == [] and redact_secrets(bare) == bare
    for benign in (
        "We decided to name release branches after rivers PROJMARK-otter-1334815064",
        "getUserAccountSettingsByIdentifierV2 returns null",
    ):
        assert redact_secrets(benign) == benign
    assert redact_secrets("key Q2hFakeR4nd0mK3yZx9Lm7Pq2Vt8Wc5Nb end") == f"key {REDACTED} end"
    assert redact_secrets("key=value and sort(key=lambda r: r.id)") == (
        "key=value and sort(key=lambda r: r.id)"
    )


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("PGPASSWORD=quokka psql -h db", "PGPASSWORD="),
        ("MYSQL_PWD=tundra mysql", "MYSQL_PWD="),
        ("REDISPASS: falcon", "REDISPASS: "),
        ("mysql -u root --password walrus shop", "--password "),
        ("mysql -uroot -pwalrus shop", "-p"),
        ("redis-cli -h c -a falcon ping", "-a "),
        ("the admin pw is meadow", "pw is "),
        ("postgres://app:hunter@db/app", "postgres://"),
        ("APP_KEY=base64:Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZmdoaWo=", "APP_KEY="),
        ("https://a.blob.core.windows.net/c?sv=1&sig=Zm9vYmFyYmF6MTIzNDU2Nzg%3D", "sig="),
        ("Datadog API key: 0a1b2c3d4e5f60718293a4b5c6d7e8f9", "key: "),
        ("the wifi passphrase has been reset to 'kumquat'", "reset to '"),
    ],
)
def test_issue9_missed_shapes(text: str, kept: str) -> None:
    """Issue 9 defect 5: shapes the old patterns missed; the name stays, the value goes."""
    out = redact_secrets(text)
    assert out is not None and REDACTED in out and kept in out, out


def test_redact_json_walks_keys_and_values() -> None:
    data = {"password": "hunter", "nested": ["token ghp_" + "a1B2" * 9], "n": 3, "note": "ok"}
    out = redact_json(data)
    assert out == {"password": REDACTED, "nested": [f"token {REDACTED}"], "n": 3, "note": "ok"}
    with pytest.raises(ValueError):
        redact_json({"k": "-----BEGIN PRIVATE KEY-----"})


ADVERSARIAL_SEEDS = [
    "a", "A", "0", "aA0", "a:", "a@", "a/", "a=", "a-", "a_", "a.", " ", "+",
    "sk-", "ghp_", "github_pat_", "glpat-", "xoxb-", "AKIA", "AIza", "eyJ", "eyJa.", "SG.",
    "hf_", "npm_", "dop_v1_", "pypi-AgEIcHlwaS5vcmc", "SK", "password=", "password_",
    "a_password", "DB_", "://", "a://a:", "a://:", "Bearer ", "Authorization: Bearer ",
    "AccountKey=", '"private_key": "', "-----BEGIN ", "-----BEGIN A ", "hooks.slack.com/services/",
    "sk_live_", "data:image/png;base64,", "sha256:", "PASSWORD=", "mysql -p", "redis-cli -a ",
    "the password is ", "key ", "pw for the ", "--password ", "-u a:", "sig=", "a8Q~",
]  # fmt: skip


@pytest.mark.parametrize("seed", ADVERSARIAL_SEEDS)
def test_patterns_are_linear_on_adversarial_input(seed: str) -> None:
    text = (seed * (100_000 // len(seed) + 1))[:100_000]
    checks = [(name, pattern.search) for name, pattern in SECRET_PATTERNS]
    checks += [(name, pattern.search) for name, pattern, _ in CONTEXT_RULES]
    checks.append(("redact_secrets", redact_secrets))
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


def test_webhook_and_client_secrets_after_a_secret_noun() -> None:
    """Found by a second, blind hand-written check: 'signing secret whsec_…' was kept."""
    whsec = "whsec_" + "Zq8" * 11
    assert "whsec_" not in redact_secrets(f"the webhook signing secret {whsec}")
    assert "Zq8Zq8" not in redact_secrets("client secret Xk29fLq0ZpQ7mWv3Rt8Y for the app")
    # a secret noun followed by words is prose, not a credential
    for benign in ("the secret sauce is caching", "our shared secret rotation runbook"):
        assert redact_secrets(benign) == benign
