"""Recognizing content that looks like a credential.

Two detectors share this module: `SECRET_PATTERNS` recognizes credentials by shape
(provider key prefixes, private key blocks, passwords in URLs and assignments, ...), and
`high_entropy_tokens` catches random-looking strings that no shape names.

Every pattern is bounded and starts only where its body cannot already be running (a
lookbehind on the body's own alphabet), so a long adversarial input is scanned in linear
time. Patterns whose match holds more than the secret (a key name, a header) capture the
secret itself as the group ``secret``: redaction replaces only that group.

What the entropy detector deliberately leaves alone (public, non-secret look-alikes):
hex strings of any length (git SHAs, short SHAs, sha256/md5 digests: a hex secret is
recognized by its assignment or prefix instead), UUIDs, ``sha1-``/``sha256-``/``sha384-``/
``sha512-`` integrity strings (npm lockfiles, SRI: digests of public content), anything
after ``sha256:``-style prefixes, ``data:...;base64,`` payloads (inline images in docs),
file paths and URL paths made of ordinary segments, and identifiers lacking any of lower
case, upper case and digits.
"""

from __future__ import annotations

import math
import re
from collections import Counter

# Values that reference a secret rather than hold one: ${VAR}, $VAR, %(x)s, <placeholder>,
# {{ template }}, os.environ[...], masked ****, None/null, or an already redacted value.
_NOT_A_VALUE = (
    r"(?![$%<{*]|\[REDACTED\]|(?:os\.|process\.env|getenv|env\()"
    r"|(?:none|null|true|false|undefined)(?![A-Za-z0-9]))"
)
# The value has a digit or a symbol, or is long: "token: string" is a type, not a token.
_VALUE_LOOKS_SECRET = r"(?=[^\s'\"`,;&]{0,255}[0-9!@#%^*+/=~?]|[^\s'\"`,;&]{16})"

_SECRET_KEYS = (
    r"(?:password|passwd|passphrase|pwd|pass|secret|client[_-]?secret|secret[_-]?key"
    r"|api[_-]?key|apikey|access[_-]?key|access[_-]?token|auth[_-]?token|refresh[_-]?token"
    r"|private[_-]?token|token)"
)

SECRET_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("private key", re.compile(r"-----BEGIN (?:[A-Z0-9]{1,20} ){0,3}PRIVATE KEY(?: BLOCK)?-----")),
    (
        "AWS access key id",
        re.compile(
            r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|APKA|AROA|ASCA)"
            r"[0-9A-Z]{16}(?![A-Za-z0-9])"
        ),
    ),
    (
        "AWS secret access key",
        re.compile(
            r"(?i)(?<![a-z0-9])aws[_.-]?secret(?:[_.-]?access)?[_.-]?key[\"']?\s{0,5}[:=]\s{0,5}"
            r"[\"']?(?P<secret>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"
        ),
    ),
    (
        "GitHub token",
        re.compile(
            r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{60,255})"
            r"(?![A-Za-z0-9_])"
        ),
    ),
    (
        "GitLab token",
        re.compile(
            r"(?<![A-Za-z0-9_-])gl(?:pat|dt|rt|ptt|ft|imt|cbt|soat|oas)-[A-Za-z0-9_-]{20,255}"
        ),
    ),
    (
        "OpenAI/Anthropic API key",
        re.compile(r"(?<![A-Za-z0-9_-])sk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,255}"),
    ),
    ("Slack token", re.compile(r"(?<![A-Za-z0-9-])xox[abprs]-[A-Za-z0-9-]{10,255}")),
    (
        "Slack webhook URL",
        re.compile(r"hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9/_-]{20,255}"),
    ),
    ("Google API key", re.compile(r"(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}(?![A-Za-z0-9_-])")),
    (
        "GCP service account key",
        re.compile(r"\"private_key(?:_id)?\"\s{0,5}:\s{0,5}\"(?P<secret>[^\"\s]{16,8192})\""),
    ),
    (
        "Azure storage key",
        re.compile(
            r"(?i)(?<![a-z0-9])(?:AccountKey|SharedAccessKey|SharedAccessSignature)="
            r"(?P<secret>[A-Za-z0-9+/=%&:-]{20,1024})"
        ),
    ),
    (
        "Stripe key",
        re.compile(r"(?<![A-Za-z0-9_])(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{20,255}(?![A-Za-z0-9])"),
    ),
    ("Hugging Face token", re.compile(r"(?<![A-Za-z0-9_])hf_[A-Za-z0-9]{30,64}(?![A-Za-z0-9])")),
    ("npm token", re.compile(r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])")),
    ("PyPI token", re.compile(r"(?<![A-Za-z0-9_-])pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,1024}")),
    (
        "DigitalOcean token",
        re.compile(r"(?<![A-Za-z0-9_])do[opr]_v1_[a-f0-9]{64}(?![A-Za-z0-9])"),
    ),
    (
        "SendGrid API key",
        re.compile(r"(?<![A-Za-z0-9_.-])SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{30,64}"),
    ),
    ("Twilio API key", re.compile(r"(?<![A-Za-z0-9])SK[0-9a-f]{32}(?![A-Za-z0-9])")),
    (
        "JSON web token",
        re.compile(
            r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{10,8192}\.[A-Za-z0-9_-]{10,8192}"
            r"\.[A-Za-z0-9_-]{10,8192}"
        ),
    ),
    # Bounded repeats and a left boundary: an unbounded scheme part backtracks
    # quadratically over a long run of letters (0.85 s for 10,000 of them).
    (
        "password in a URL",
        re.compile(
            r"(?<![a-z0-9+.-])[a-z][a-z0-9+.-]{0,31}://[^/\s:@]{0,256}:[^/\s@]{3,256}@", re.I
        ),
    ),
    (
        "authorization header",
        re.compile(
            r"(?i)(?<![a-z0-9])(?:authorization[\"']?\s{0,5}[:=]\s{0,5}[\"']?"
            r"(?:bearer|basic|token|digest)\s{1,5}|bearer\s{1,5}(?=[A-Za-z0-9._~+/-]{0,4095}\d))"
            + _NOT_A_VALUE
            + r"(?P<secret>[A-Za-z0-9._~+/=-]{12,4096})"
        ),
    ),
    (
        "password or secret assignment",
        re.compile(
            r"(?i)(?<![a-z0-9])"
            + _SECRET_KEYS
            + r"(?![a-z0-9])[\"']?\s{0,5}(?::=|[:=])\s{0,5}[\"']?"
            + _NOT_A_VALUE
            + _VALUE_LOOKS_SECRET
            + r"(?P<secret>[^\s'\"`,;&]{6,256})"
        ),
    ),
)

# -- high entropy ---------------------------------------------------------------------------

HIGH_ENTROPY_MIN_LENGTH = 24
HIGH_ENTROPY_THRESHOLD = 3.7  # bits per character; random base64 of 24+ chars is ~4.2+
_TOKEN = re.compile(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/=_-]{24,}")
_HEX_ISH = re.compile(r"[0-9a-fA-F-]+")
_DIGEST_PREFIX = re.compile(r"(?i)(?:sha(?:1|224|256|384|512)|md5)-")
_DIGEST_BEFORE = re.compile(r"(?i)(?:sha(?:1|224|256|384|512)|md5|base64),?[:=]?$")


def _entropy(s: str) -> float:
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


def _random_looking(token: str) -> bool:
    core = token.strip("=-_/+")
    if len(core) < HIGH_ENTROPY_MIN_LENGTH or _HEX_ISH.fullmatch(core):
        return False
    if not (re.search(r"[a-z]", core) and re.search(r"[A-Z]", core) and re.search(r"\d", core)):
        return False
    return _entropy(core) >= HIGH_ENTROPY_THRESHOLD


def _suspicious(token: str) -> bool:
    if _DIGEST_PREFIX.match(token):  # npm / SRI integrity: a digest of public content
        return False
    if "/" in token and not re.search(r"[+=]", token):  # a path: judge each segment
        return any(_random_looking(seg) for seg in token.split("/"))
    return _random_looking(token)


def high_entropy_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of random-looking tokens in ``text`` (see the module docstring)."""
    spans = []
    for m in _TOKEN.finditer(text):
        before = text[max(0, m.start() - 16) : m.start()]
        if _DIGEST_BEFORE.search(before):  # data:...;base64,<payload>, sha256:<digest>
            continue
        if _suspicious(m.group(0)):
            spans.append(m.span())
    return spans


def high_entropy_tokens(text: str) -> list[str]:
    """Random-looking tokens in ``text`` that no provider shape names."""
    return [text[s:e] for s, e in high_entropy_spans(text)]


def find_secrets(text: str) -> list[str]:
    """Names of the credential kinds that ``text`` seems to contain (empty if none)."""
    found = [name for name, pattern in SECRET_PATTERNS if pattern.search(text)]
    if high_entropy_spans(text):
        found.append("high-entropy string")
    return found


REDACTED = "[REDACTED]"

# -- redaction ------------------------------------------------------------------------------

_PRIVATE_TAG = re.compile(r"<(/?)private\s*>", re.I)


def strip_private(text: str) -> str:
    """``text`` without ``<private>...</private>`` spans, failing closed.

    Nested spans count as one; an unclosed ``<private>`` drops everything after it, and a
    stray ``</private>`` drops everything before it (its opening tag was lost, so what
    precedes may be private). One pass, linear in the length of ``text``.
    """
    kept: list[str] = []
    depth = 0
    pos = 0
    for tag in _PRIVATE_TAG.finditer(text):
        if not tag.group(1):
            if depth == 0:
                kept.append(text[pos : tag.start()])
            depth += 1
        elif depth == 0:
            kept, pos = [], tag.end()
        else:
            depth -= 1
            if depth == 0:
                kept.append(" ")
                pos = tag.end()
    if depth == 0:
        kept.append(text[pos:])
    return "".join(kept)


def _redact_match(name: str, m: re.Match[str]) -> str:
    found = m.group(0)
    if name == "password in a URL":  # keep scheme and host: scheme://[REDACTED]@host
        scheme, _, _ = found.partition("://")
        return f"{scheme}://{REDACTED}@"
    if "secret" in m.re.groupindex and m.group("secret"):  # keep the key name / header
        start, end = m.span("secret")
        return found[: start - m.start()] + REDACTED + found[end - m.start() :]
    return REDACTED


# "the password is hunter2!" in prose: a value with a digit or symbol is taken as the
# secret itself ("the token is expired" is left alone).
_SPOKEN_SECRET = re.compile(
    r"(?i)\b(?P<key>(?:password|passwd|passphrase|pwd|secret|token|api[ _-]?key)s?"
    r"\s+(?:is|was|are|were)\s+['\"`]?)(?P<value>[^\s'\"`]+)"
)


def _redact_spoken(m: re.Match[str]) -> str:
    value = m.group("value")
    token = value.rstrip(".,;:!?)")
    if len(token) < 4 or not re.search(r"[\d\W_]", token) or token == REDACTED:
        return m.group(0)
    return m.group("key") + REDACTED + value[len(token) :]


def redact_secrets(text: str) -> str | None:
    """``text`` with credentials (`redact.SECRET_PATTERNS`, plus "the password is x1y2"
    in prose) replaced by ``[REDACTED]``; None when it holds a private key, as only its
    header is recognizable and nothing after it is safe."""
    for name, pattern in SECRET_PATTERNS:
        if name == "private key":
            if pattern.search(text):
                return None
            continue
        text = pattern.sub(lambda m, n=name: _redact_match(n, m), text)
    for start, end in reversed(high_entropy_spans(text)):
        text = text[:start] + REDACTED + text[end:]
    return _SPOKEN_SECRET.sub(_redact_spoken, text)
