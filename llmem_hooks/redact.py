"""Recognizing content that looks like a credential.

For now the CLI only warns when such content is stored; the extraction pipeline will use
the same patterns to redact before anything reaches the store or a model.
"""

from __future__ import annotations

import re

SECRET_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("private key", re.compile(r"-----BEGIN (?:[A-Z ]+ )?PRIVATE KEY-----")),
    ("AWS access key id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    (
        "GitHub token",
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{60,})\b"),
    ),
    ("OpenAI/Anthropic API key", re.compile(r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}\b")),
    ("Slack token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b")),
    ("Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b")),
    (
        "JSON web token",
        re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"),
    ),
    # Bounded repeats and a left boundary: an unbounded scheme part backtracks
    # quadratically over a long run of letters (0.85 s for 10,000 of them).
    (
        "password in a URL",
        re.compile(
            r"(?<![a-z0-9+.-])[a-z][a-z0-9+.-]{0,31}://[^/\s:@]{1,256}:[^/\s@]{3,256}@", re.I
        ),
    ),
    (
        "password or secret assignment",
        re.compile(
            r"(?i)\b(?:password|passwd|pwd|secret|api[_-]?key|access[_-]?token|auth[_-]?token)"
            r"\b\s*[:=]\s*['\"]?[^\s'\"]{6,}"
        ),
    ),
)


def find_secrets(text: str) -> list[str]:
    """Names of the credential kinds that ``text`` seems to contain (empty if none)."""
    return [name for name, pattern in SECRET_PATTERNS if pattern.search(text)]
