"""Recognizing and redacting content that looks like a credential.

The rule (issue 9): a value is a secret when

1. it has a known credential *shape*: a provider prefix (``ghp_``, ``sk-``, ``AKIA``,
   ``xoxb-``, ``glpat-``, ``hvs.``, ``GOCSPX-``, ``key-`` + 32, ``…8Q~…``), a JWT, a PEM
   private key block, a password in a URL (``scheme://user:pw@host``); or
2. it sits in a credential *context*: the value of a key-like name (``PGPASSWORD=``,
   ``"client_secret":``, ``X-Api-Key:``, ``--db-password x``), of a credential flag of a
   known command (``mysql -pX``, ``sshpass -p X``, ``redis-cli -a X``, ``curl -u u:X``),
   an ``Authorization`` header, ``sig=`` of an Azure SAS, or follows a credential noun in
   prose ("the admin pw is X", "Datadog API key: X").

A random-looking token alone is *never* a secret: mixing case and digits is what
identifiers, build ids, SHAs, UUIDs, trace ids and image tags do too. In a context, names
split in two classes: password-like (``pass``, ``pwd``, ``pw``, ``passphrase``, ``secret``,
``credentials``) take any real value, even a plain word ("hunter"); key-like (``key``,
``token``, ``auth``, ``sig``) take only a random-looking value ("key=value" stays).
References are never values: ``${VAR}``, ``$VAR``, ``<placeholder>``, ``{{ x }}``,
``os.environ[...]``, paths, ``null``/``true``, type names, ``***``, ``[REDACTED]``.

Every pattern is bounded and anchored on a boundary, so long adversarial input is scanned
in linear time. Redaction replaces only the secret (``name=[REDACTED]``) and keeps the
context readable.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

REDACTED = "[REDACTED]"

# -- shapes: the whole match is the secret ------------------------------------------------------

PRIVATE_KEY = re.compile(r"-----BEGIN (?:[A-Z0-9]{1,20} ){0,3}PRIVATE KEY(?: BLOCK)?-----")

SECRET_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("private key", PRIVATE_KEY),
    (
        "AWS access key id",
        re.compile(
            r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|APKA|AROA|ASCA)"
            r"[0-9A-Z]{16}(?![A-Za-z0-9])"
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
    ("Slack token", re.compile(r"(?<![A-Za-z0-9-])xox[abprse]-[A-Za-z0-9-]{10,255}")),
    (
        "Slack webhook URL",
        re.compile(r"hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9/_-]{20,255}"),
    ),
    ("Google API key", re.compile(r"(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}(?![A-Za-z0-9_-])")),
    ("Google OAuth client secret", re.compile(r"(?<![A-Za-z0-9_-])GOCSPX-[A-Za-z0-9_-]{24,40}")),
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
    ("Mailgun key", re.compile(r"(?<![A-Za-z0-9_-])key-[0-9a-z]{32}(?![A-Za-z0-9])")),
    (
        "Shopify token",
        re.compile(r"(?<![A-Za-z0-9_])shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}(?![A-Za-z0-9])"),
    ),
    (
        "webhook signing secret",
        re.compile(r"(?<![A-Za-z0-9_])whsec_[A-Za-z0-9+/=]{24,255}(?![A-Za-z0-9+/=])"),
    ),
    ("Vault token", re.compile(r"(?<![A-Za-z0-9_.])hv[sbr]\.[A-Za-z0-9_-]{24,255}")),
    (
        "Azure client secret",
        re.compile(
            r"(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.-]{3}[0-9]Q~[A-Za-z0-9_~.-]{30,40}(?![A-Za-z0-9_~.-])"
        ),
    ),
    (
        "JSON web token",
        re.compile(
            r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{10,8192}\.[A-Za-z0-9_-]{10,8192}"
            r"\.[A-Za-z0-9_-]{10,8192}"
        ),
    ),
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
        "Azure SAS signature",
        re.compile(r"(?<![A-Za-z0-9_])sig=(?P<secret>[A-Za-z0-9%+/=_-]{16,512})"),
    ),
)

# -- contexts: a name, flag or noun, then the value ---------------------------------------------


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# What a reference, placeholder or type looks like (never a value).
_REFERENCE = re.compile(
    r"(?i)^(?:[$<{\[]|%\(\w+\)[sdr]|%\w+%(?:$|[\\/])|\*{3,}|x{3,}$|(?:os\.|process\.env|getenv|env\(|secrets\."
    r"|vault:|ref\+))"
)
_NOT_VALUES = _words(
    "none null nil true false undefined yes no on off string str int bool boolean text number "
    "required optional secret password token key value values changeme example redacted "
    "hidden masked empty blank unset default env"
)
# Prose: a lowercase word after "password is" is English, not the password.
_ENGLISH = _words(
    "a an the is in on at of for to from with by and or not no never always still now also "
    "just only too very same here there this that it its our your my their his her what which "
    "who how when where why be been being set unset empty blank wrong incorrect invalid "
    "expired required optional missing correct right weak strong long short secret hidden "
    "masked stored hashed encrypted rotated changed reset saved shared known unknown needed "
    "provided generated managed configured available mandatory enabled disabled visible "
    "different case sensitive same new old current temporary default one two any all some "
    "none null given below above attached included listed there different sent kept used "
    "fine ok okay good bad same easy hard simple complex unique random wrong leaked safe secure "
    "compromised exposed public private local global per each every should must will can "
    "could would may might does did has have had was were are see use ask check read get run "
    "call contact type enter click open find look copy paste generate rotate change update "
    "store save keep send provide follow refer request"
)
_ENGLISH_SUFFIX = re.compile(r"(?:ed|ing|ly|able|ible|ive|ous|ful|less|ment|ness|tion|sion)$")

_PASSWORD_WORDS = _words(
    "password passwd pass pwd pw passphrase passcode secret credential credentials creds cred"
)
_KEY_WORDS = _words(
    "key token cookie apikey auth sig signature sas accesskey secretkey privatekey apitoken "
    "authtoken accesstoken"
)
_NOT_PASS = ("bypass", "compass", "surpass", "overpass", "underpass", "trespass", "multipass")
# A key or token named for what it indexes or where it lives, not what it unlocks: cache
# key, primary key, public key, idempotency key, page token, existingSecret (a name).
_NOT_CREDENTIAL_QUALIFIERS = _words(
    "cache primary foreign partition sort range hash row composite unique lookup routing map "
    "dict object s3 blob file redis memcached idempotency dedup dedupe deduplication public "
    "publishable host gpg pgp ssh fingerprint page next continuation pagination cursor "
    "cancellation sync lexer parser design i18n translation message index shard foreign "
    "existing external sealed license product registry"
)


def _name_class(name: str) -> str | None:
    """'password', 'key' or None for a variable, key or flag name, judged by its last
    component (``SECRET_ROTATION_DAYS`` is a number of days, ``DB_PASSWORD`` a password)."""
    parts = re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+", name)
    if not parts:
        return None
    if len(parts) > 1 and parts[-2].lower() in _NOT_CREDENTIAL_QUALIFIERS:
        return None
    last = parts[-1].lower()
    if last in _PASSWORD_WORDS:
        return "password"
    if last in _KEY_WORDS:
        return "key"
    if last.endswith(("password", "passwd", "pwd", "passphrase", "secret")):
        return "password"
    if last.endswith("pass") and not last.endswith(_NOT_PASS):
        return "password"
    if last.endswith(("token", "apikey", "secretkey", "accesskey", "privatekey")):
        return "key"
    return None


def _entropy(s: str) -> float:
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


# A segment of a name: "node20", "3f9a7c1e", "EastUs", "X64", not "zyNt2Ir41p".
_WORDLIKE = re.compile(r"[a-z0-9]+|[A-Z0-9]+|[A-Z]?[a-z]+(?:[A-Z][a-z]+)*[0-9]*")


def random_looking(value: str) -> bool:
    """A value that reads like generated key material rather than a word or a name."""
    core = value.removeprefix("base64:").strip("=")
    if len(core) < 12:
        return False
    has_digit = any(c.isdigit() for c in core)
    has_alpha = any(c.isalpha() for c in core)
    if re.fullmatch(r"[0-9a-fA-F]{16,}", core):
        return has_digit and has_alpha
    segments = [seg for seg in re.split(r"[-_.:/]+", core) if seg]
    if (
        len(segments) >= 3
        and max(map(len, segments)) <= 10
        and all(_WORDLIKE.fullmatch(seg) for seg in segments)
    ):
        return False  # linux-x64-node20-3f9a7c1e: a compound name, not key material
    classes = (
        any(c.islower() for c in core)
        + any(c.isupper() for c in core)
        + has_digit
        + bool(re.search(r"[^A-Za-z0-9_.:/-]", core))
    )
    entropy = _entropy(core)
    if classes >= 3 and entropy >= 3.0:
        return True
    if len(core) >= 16 and has_digit and has_alpha and entropy >= 3.0:
        return True
    return len(core) >= 20 and classes >= 2 and entropy >= 3.5


def _is_path(value: str) -> bool:
    """/run/secrets/db, ./creds.json, ~/.pgpass: where a secret lives, not the secret."""
    return value.startswith(("/", "./", "../", "~/")) and not any(
        random_looking(seg) for seg in value.split("/")
    )


def _is_ellipsis(value: str) -> bool:
    """ "...", "..." + a word: an elided value; dots before key material are still a secret."""
    rest = value.lstrip(".")
    return len(value) - len(rest) >= 2 and not random_looking(rest)


def _is_reference(value: str) -> bool:
    return (
        not value
        or value == REDACTED
        or bool(_REFERENCE.match(value))
        or _is_ellipsis(value)
        or _is_path(value)
        or value.lower() in _NOT_VALUES
        or (value.isdigit() and len(value) < 6)
    )


def _value_is_secret(kind: str, value: str, quoted: bool = True, following: str = "") -> bool:
    """Whether ``value``, found after a name or noun of ``kind``, is a credential.

    An unquoted plain word is English when it is a common word, has an English suffix,
    or is followed by an article ("password: see the vault")."""
    value = value.strip()
    if _is_reference(value) or REDACTED in value:
        return False
    if kind == "key":
        return random_looking(value)
    if len(value) < 3:
        return False
    if not quoted and value.isalpha():
        word = value.lower()
        if word in _ENGLISH or _ENGLISH_SUFFIX.search(word):
            return False
        return not _ARTICLE_NEXT.match(following)
    return True


_ARTICLE_NEXT = re.compile(r"(?i)\s{1,3}(?:the|a|an|your|our|my|their|its|this|that|these|those)\b")


def _qualified(m: re.Match[str]) -> bool:
    """The noun is qualified as a non-credential: "cache key", "public key", "page token"."""
    before = re.search(r"([A-Za-z0-9]+)[\s_-]{1,3}$", m.string[max(0, m.start() - 32) : m.start()])
    return before is not None and before.group(1).lower() in _NOT_CREDENTIAL_QUALIFIERS


_Q_VALUE = (
    r"(?:\"(?P<dq>[^\"\n]{1,256})\"|'(?P<sq>[^'\n]{1,256})'|`(?P<bq>[^`\n]{1,256})`"
    r"|(?P<bare>[^\s'\"`,;&<>{}\[\]]{1,256}))"
)


def _value_span(m: re.Match[str]) -> tuple[int, int, bool]:
    for group, quoted in (("dq", True), ("sq", True), ("bq", True), ("bare", False)):
        if group in m.re.groupindex and m.group(group) is not None:
            start, end = m.span(group)
            if not quoted:  # trailing sentence punctuation is not part of a value
                end = start + len(m.group(group).rstrip(".,;:!?)"))
            return start, end, quoted
    raise AssertionError("no value group")


_STEM = (
    r"(?:pass(?:word|wd|phrase|code)?|pwd|pw|secret|token|key|creds?|credentials|auth|sig"
    r"|signature|sas|pin|cookie)"
)
# NAME = value, NAME: value, "name": "value", NAME := value, name => value.
_ASSIGNMENT = re.compile(
    r"(?i)(?<![A-Za-z0-9_.-])(?P<name>[A-Za-z0-9_.-]{0,48}?" + _STEM + r")"
    r"(?![A-Za-z0-9])[\"']?\s{0,3}(?::=|=>|[:=])\s{0,3}" + _Q_VALUE
)
# --name value, --name=value
_FLAG = re.compile(
    r"(?i)(?<![A-Za-z0-9_-])--(?P<name>[A-Za-z0-9-]{0,40}?" + _STEM + r")(?![A-Za-z0-9_-])"
    r"(?:=|\s{1,3})" + _Q_VALUE
)
# Commands whose -p (or redis-cli's -a) takes the password itself.
_COMMAND_PASSWORD = re.compile(
    r"(?<![A-Za-z0-9_-])(?:(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlshow|mysqlcheck"
    r"|mariadb|mariadb-dump|sshpass|mongo|mongosh|mongodump|mongorestore|mongoexport"
    r"|mongoimport)(?![A-Za-z0-9_-])[^\n|;&]{0,200}?\s-p\s{0,3}|redis-cli(?![A-Za-z0-9_-])"
    r"[^\n|;&]{0,200}?\s-a\s{1,3}|(?:docker|podman|nerdctl|buildah|skopeo|helm\s+registry"
    r"|oras)\s+login(?![A-Za-z0-9_-])[^\n|;&]{0,200}?\s-p\s{1,3})" + _Q_VALUE
)
# curl -u user:password, --user user:password
_USER_COLON = re.compile(
    r"(?<![A-Za-z0-9_-])(?:-u\s{0,3}|--user[=\s]\s{0,2})[\"']?[^\s:\"'@]{1,64}:"
    r"(?P<bare>[^\s\"'@]{1,256})"
)
# scheme://user:password@host
_URL_PASSWORD = re.compile(
    r"(?i)(?<![a-z0-9+.-])(?P<scheme>[a-z][a-z0-9+.-]{0,31})://[^/\s:@]{0,256}:"
    r"(?P<bare>[^/\s@]{1,256})@"
)
_AUTH_HEADER = re.compile(
    r"(?i)(?<![a-z0-9])(?:authorization[\"']?\s{0,5}[:=]\s{0,5}[\"']?"
    r"(?:bearer|basic|token|digest)\s{1,5}|bearer\s{1,5}(?=[A-Za-z0-9._~+/-]{0,4095}\d))"
    r"(?P<bare>[A-Za-z0-9._~+/=-]{8,4096})"
)
# Prose: "the admin pw is X", "Datadog API key: X", "db password was changed to 'X'",
# "pw for the wifi: X".
_KEY_NOUN = (
    r"(?:(?:(?:api|access|secret|app|auth|private|encryption|master|signing|license|client"
    r"|account|session)[ _-]?)?(?:key|token|cookie)|(?:signing[ _-]?)?salt"
    r"|(?:(?:webhook|signing|client|app|api|shared)[ _-]?)?secret)"
)
_PROSE = re.compile(
    r"(?i)(?<![A-Za-z0-9_])(?P<kw>" + _KEY_NOUN + r"|pass(?:word|wd|phrase|code)?|pwd|pw|pin"
    r"|secret|creds|credentials)(?![A-Za-z0-9_-])"
    r"(?:\s{1,3}(?:for|of|on|in)(?:\s{1,3}[\w.-]{1,24}){1,3})?"
    # The longest linker first: "was changed to X" must not stop at "was" + "changed".
    r"(?P<link>\s{1,3}(?:(?:is|was|has\s{1,3}been|got)\s{1,3})?"
    r"(?:changed|set|reset|updated)\s{1,3}to\s{1,3}|\s{0,3}(?::|=|->|=>)\s{0,3}"
    r"|\s{1,3}(?:is|was|are|were)\s{1,3}(?:(?:now|still)\s{1,3})?"
    r"(?:(?:stored|saved|kept|set|given)\s{1,3}as\s{1,3})?|\s{1,3}to\s{1,3})" + _Q_VALUE
)
# "key <random>", "auth token <random>": a key noun right next to key material.
_PROSE_ADJACENT = re.compile(
    r"(?i)(?<![A-Za-z0-9_])" + _KEY_NOUN + r"\s{1,3}(?P<bare>[A-Za-z0-9+/=_.~-]{12,512})"
)


def _kind_of_keyword(kw: str) -> str:
    kw = kw.lower()
    if kw.endswith(("key", "token", "cookie", "salt")):
        return "key"
    return "password"


ContextRule = tuple[str, re.Pattern[str], Callable[[re.Match[str]], str | None]]


def _assignment_kind(m: re.Match[str]) -> str | None:
    return _name_class(m.group("name"))


def _prose_kind(m: re.Match[str]) -> str | None:
    return None if _qualified(m) else _kind_of_keyword(m.group("kw"))


def _adjacent_kind(m: re.Match[str]) -> str | None:
    return None if _qualified(m) else "key"


def _another_option(m: re.Match[str]) -> bool:
    """The value is the next option ("--verbose"), not key material that starts with "-"."""
    start, end, _ = _value_span(m)
    return m.string.startswith("-", start) and not random_looking(m.string[start:end])


def _option_kind(m: re.Match[str]) -> str | None:
    """The next argument of a password option, unless it is another option."""
    return None if _another_option(m) else "password"


def _flag_kind(m: re.Match[str]) -> str | None:
    return None if _another_option(m) else _assignment_kind(m)


CONTEXT_RULES: tuple[ContextRule, ...] = (
    ("password in a URL", _URL_PASSWORD, lambda m: "password"),
    ("authorization header", _AUTH_HEADER, lambda m: "password"),
    ("command-line password", _COMMAND_PASSWORD, _option_kind),
    ("user:password option", _USER_COLON, lambda m: "password"),
    ("credential flag", _FLAG, _flag_kind),
    ("credential assignment", _ASSIGNMENT, _assignment_kind),
    ("credential in prose", _PROSE, _prose_kind),
    ("key material after a key noun", _PROSE_ADJACENT, _adjacent_kind),
)


_STEMS = ("pass", "pw", "secret", "token", "key", "cred", "auth", "sig", "sas", "pin", "cookie")
# Literals (lower case) without which a rule cannot match: most text skips most rules,
# which keeps redaction cheap on the import path.
_TRIGGERS: dict[str, tuple[str, ...]] = {
    "AWS access key id": ("akia", "asia", "abia", "acca", "agpa", "aida", "aipa", "anpa",
                          "anva", "apka", "aroa", "asca"),
    "GitHub token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    "GitLab token": ("gl",),
    "OpenAI/Anthropic API key": ("sk-",),
    "Slack token": ("xox",),
    "Slack webhook URL": ("hooks.slack.com",),
    "Google API key": ("aiza",),
    "Google OAuth client secret": ("gocspx-",),
    "Stripe key": ("_live_", "_test_"),
    "Hugging Face token": ("hf_",),
    "npm token": ("npm_",),
    "PyPI token": ("pypi-",),
    "DigitalOcean token": ("_v1_",),
    "SendGrid API key": ("sg.",),
    "Twilio API key": ("sk",),
    "Mailgun key": ("key-",),
    "Shopify token": ("shp",),
    "webhook signing secret": ("whsec_",),
    "Vault token": ("hvs.", "hvb.", "hvr."),
    "Azure client secret": ("q~",),
    "JSON web token": ("eyj",),
    "GCP service account key": ("private_key",),
    "Azure storage key": ("accountkey=", "sharedaccess"),
    "Azure SAS signature": ("sig=",),
    "password in a URL": ("://",),
    "authorization header": ("authorization", "bearer"),
    "command-line password": ("mysql", "mariadb", "sshpass", "mongo", "redis-cli", "login"),
    "user:password option": ("-u", "--user"),
    "credential flag": ("--",),
    "credential assignment": _STEMS,
    "credential in prose": (*_STEMS, "salt"),
    "key material after a key noun": ("key", "token", "cookie", "salt", "secret"),
}  # fmt: skip


def _apply(text: str, found: list[str] | None) -> str:
    """Redact every shape and context in turn; names of what matched go to ``found``."""
    low = text.lower()  # replacements only remove triggers, so one lower() serves all rules
    for name, pattern in SECRET_PATTERNS[1:]:
        if not any(t in low for t in _TRIGGERS[name]):
            continue

        def shape(m: re.Match[str], name: str = name) -> str:
            if found is not None and name not in found:
                found.append(name)
            if "secret" in m.re.groupindex and m.group("secret"):
                s, e = m.span("secret")
                return m.group(0)[: s - m.start()] + REDACTED + m.group(0)[e - m.start() :]
            return REDACTED

        text = pattern.sub(shape, text)
    for name, pattern, classify in CONTEXT_RULES:
        if not any(t in low for t in _TRIGGERS[name]):
            continue

        def context(
            m: re.Match[str],
            name: str = name,
            classify: Callable[[re.Match[str]], str | None] = classify,
        ) -> str:
            kind = classify(m)
            if kind is None:
                return m.group(0)
            start, end, quoted = _value_span(m)
            value = m.string[start:end]
            is_url = name == "password in a URL"
            following = m.string[end : end + 8]
            if not (is_url and value == REDACTED) and not _value_is_secret(
                kind, value, quoted, following
            ):
                return m.group(0)
            if is_url:  # the user name goes too: scheme://[REDACTED]@host
                start = m.end("scheme") + 3
            if found is not None and name not in found:
                found.append(name)
            whole = m.group(0)
            return whole[: start - m.start()] + REDACTED + whole[end - m.start() :]

        text = pattern.sub(context, text)
    return text


def find_secrets(text: str) -> list[str]:
    """Names of the credential kinds that ``text`` seems to contain (empty if none)."""
    found: list[str] = ["private key"] if PRIVATE_KEY.search(text) else []
    _apply(text, found)
    return found


# -- redaction ----------------------------------------------------------------------------------

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


def redact_secrets(text: str) -> str | None:
    """``text`` with credentials (see the module docstring) replaced by ``[REDACTED]``;
    None when it holds a private key, as only its header is recognizable and nothing
    after it is safe."""
    if PRIVATE_KEY.search(text):
        return None
    return _apply(text, None)


# A key block to its END line, or (no END: it was cut) to the end of the text. Lazy and
# anchored on the BEGIN header, so a text with many headers is still scanned once.
_KEY_BLOCK = re.compile(
    r"-----BEGIN (?:[A-Z0-9]{1,20} ){0,3}PRIVATE KEY(?: BLOCK)?-----"
    r".*?(?:-----END (?:[A-Z0-9]{1,20} ){0,3}PRIVATE KEY(?: BLOCK)?-----|\Z)",
    re.DOTALL,
)


_KEY_END = re.compile(r"-----END (?:[A-Z0-9]{1,20} ){0,3}PRIVATE KEY(?: BLOCK)?-----")


def redact_key_blocks(text: str) -> str:
    """``text`` with each private key block (header to END line) replaced by
    ``[REDACTED]``. Fail closed, as `strip_private` does: a block without its END line
    takes the rest of the text with it, and an END line left without its header (the key
    was pasted over two messages) takes everything before it."""
    if "PRIVATE KEY" not in text:
        return text
    text = _KEY_BLOCK.sub(REDACTED, text)
    ends = [m.end() for m in _KEY_END.finditer(text)]
    return REDACTED + text[ends[-1] :] if ends else text


def redact_transcript(text: str) -> str:
    """What an agent's transcript said, safe to keep: key blocks and every credential
    replaced by ``[REDACTED]``. Never None: text read from a transcript is redacted,
    never refused (one pasted key must not cost a whole exchange or session)."""
    return _apply(redact_key_blocks(text), None)


def redact_json(value: Any) -> Any:
    """A JSON-like value with every string redacted, keys included, and the value of a
    credential-named key (``{"password": "hunter"}``) judged as an assignment.

    Raises ValueError when a string holds a private key (the caller refuses the record).
    """
    if isinstance(value, str):
        out = redact_secrets(value)
        if out is None:
            raise ValueError("holds a private key")
        return out
    if isinstance(value, list | tuple):
        return [redact_json(v) for v in value]
    if isinstance(value, dict):
        result: dict[Any, Any] = {}
        for key, item in value.items():
            safe_key = redact_json(key) if isinstance(key, str) else key
            kind = _name_class(key) if isinstance(key, str) else None
            if kind is not None and isinstance(item, str) and _value_is_secret(kind, item):
                item = REDACTED
            result[safe_key] = redact_json(item)
        return result
    return value
