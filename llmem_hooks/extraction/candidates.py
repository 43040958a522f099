"""What extraction produces and the contracts of whatever produces it.

`Candidate` is a proposed memory and `Assessment` a session-end self-assessment. The
`Extractor` and `Assessor` protocols are the interface a model-backed extractor
implements (`llm.OllamaExtractor`; the heuristics in `heuristics.py` are an `Extractor`
too), and `SessionAssessor` is what the session hooks ask at session end
(`engine.ExtractionEngine`). Whatever produced them, candidates pass
`finalize_candidates`, the one gate before the store: private spans, credentials, type,
tags, length, duplicates. `split_candidates` then parts them: the ones sure enough to keep
(confidence >= `MIN_CONFIDENCE`) become memories, the others go to the inbox, where the
dream promotes one that a later session says again or a model confirms (docs/extraction.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from ..errors import ValidationError
from ..events import Message
from ..redact import REDACTED, redact_transcript, strip_private
from ..registry import check_memory_type
from ..store import MAX_CONTENT_CHARS, normalize_tags
from ..store.records import MAX_LIST_ITEMS, MAX_TAGS

Scope = Literal["project", "global"]

MIN_WORDS = 3
MAX_TECH_TAGS = 5
# Candidates below this are not sure enough to keep: they wait in the inbox for a later
# session to say them again (or a model to confirm them) instead of being dropped.
MIN_CONFIDENCE = 0.5


@dataclass
class Candidate:
    """A memory the extractor proposes; the session hooks store it as is."""

    type: str
    content: str
    confidence: float
    tags: list[str] = field(default_factory=list)
    scope: Scope = "project"
    source_message_ids: list[str] = field(default_factory=list)
    # What a change statement says is gone ("we moved from X to Y": "X"); the session
    # hooks mark stored memories about it superseded (`supersede.supersede_replaced`).
    replaces: str | None = None


@dataclass
class Extraction:
    """What one extraction found: candidates sure enough to keep (``memories``) and the
    ones that are not (``inbox``), each list past `finalize_candidates`."""

    memories: list[Candidate] = field(default_factory=list)
    inbox: list[Candidate] = field(default_factory=list)


@dataclass
class Assessment:
    """A session-end ``self_assessment`` memory: text, tags, metadata and who made it
    (``"ollama"`` or ``"heuristic: <why not the model>"``)."""

    content: str
    tags: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    assessed_by: str = "heuristic"


# -- the protocols -------------------------------------------------------------------------


class Extractor(Protocol):
    """Anything that proposes memories from messages (`HeuristicExtractor`,
    `OllamaExtractor`, `ExtractionEngine`). It may raise: the engine then falls back to
    the heuristics and says why."""

    def extract(
        self, messages: Sequence[Message], *, project: str | None = None
    ) -> list[Candidate]: ...


@runtime_checkable
class StagesCandidates(Protocol):
    """An extractor that also hands over the candidates it is not sure of (for the inbox);
    its ``extract`` returns the sure ones only."""

    def extract_staged(
        self, messages: Sequence[Message], *, project: str | None = None
    ) -> Extraction: ...


def extract_staged(
    extractor: Extractor, messages: Sequence[Message], *, project: str | None = None
) -> Extraction:
    """`StagesCandidates.extract_staged` when ``extractor`` has it; else its ``extract``,
    all kept (an extractor that does not stage decides alone what is worth a memory)."""
    if isinstance(extractor, StagesCandidates):
        return extractor.extract_staged(messages, project=project)
    return Extraction(list(extractor.extract(messages, project=project)), [])


@runtime_checkable
class ReportsStatus(Protocol):
    """An extractor that names itself and says what its last `extract` did
    (``"ollama: 2 chunks, 812 tokens"``); the engine shows it as ``last_run``."""

    name: str
    last_status: str


@runtime_checkable
class Assessor(Protocol):
    """An extractor that can also assess a finished session with its model; raises an
    `LLMemError` when it cannot (the engine then writes the plain-text counts)."""

    def assess(
        self, messages: Sequence[Message], *, session_key: str | None = None
    ) -> Assessment: ...


@runtime_checkable
class SessionAssessor(Protocol):
    """What the session hooks ask at session end (`ExtractionEngine.assess_session`):
    never raises for a model failure; None for an empty session."""

    def assess_session(
        self, messages: Sequence[Message], *, session_key: str | None = None
    ) -> Assessment | None: ...


# -- words ---------------------------------------------------------------------------------

_WORD = re.compile(r"[A-Za-z0-9][\w'./+#-]*")


def word_set(text: str) -> frozenset[str]:
    """The whitespace-separated words of ``text``: how word lists are written here."""
    return frozenset(text.split())


def words(text: str) -> list[str]:
    """The words of ``text`` (identifiers, paths and versions count as one word)."""
    return _WORD.findall(text)


def normalize_key(text: str) -> str:
    """Case, punctuation and spacing folded: the identity used to drop duplicates."""
    return " ".join(re.sub(r"[^\w]+", " ", text.lower()).split())


# -- automatic tags -----------------------------------------------------------------------

TECH_TAGS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (tag, re.compile(pattern, re.I))
    for tag, pattern in (
        ("docker", r"\bdocker|\bcontainers?\b|\bcompose\b"),
        ("kubernetes", r"\bk8s\b|kubernetes|kubectl|\bhelm\b|\bgke\b|\beks\b"),
        ("git", r"\bgit\b|github|gitlab|\brebase|\bsquash|\bcommits?\b|\bbranch|\bmerge|\bpush\b"),
        ("postgres", r"postgres|\bpsql\b|\bpg\b"),
        ("mysql", r"\bmysql|mariadb"),
        ("sqlite", r"sqlite"),
        ("redis", r"\bredis"),
        ("kafka", r"\bkafka"),
        ("python", r"\bpython|\bpip\b|\bvenv\b|\.py\b|\bpoetry\b|\buv\b"),
        ("pytest", r"\bpytest"),
        ("typescript", r"typescript|\btsc\b|\.tsx?\b"),
        ("javascript", r"javascript|\bnode(?:\.?js)?\b|\.jsx?\b"),
        ("npm", r"\bnpm\b"),
        ("pnpm", r"\bpnpm\b"),
        ("yarn", r"\byarn\b"),
        ("rust", r"\brust\b|\bcargo\b"),
        ("go", r"\bgolang\b|\bgo\.mod\b|\bgo (?:test|build|run|mod)\b"),
        ("terraform", r"terraform"),
        ("aws", r"\baws\b|\bs3\b|\bec2\b"),
        ("deploy", r"\bdeploy|\breleases?\b|\brollouts?\b|\bblue-green\b"),
        ("testing", r"\btests?\b|\btesting\b|\be2e\b|\bfixtures?\b|\bmocks?\b|\bpytest\b|\bjest\b"),
        ("ci", r"\bci\b|github actions|\bpipelines?\b|\bjenkins\b"),
        ("database", r"\bdatabases?\b|\bdb\b|\bmigrations?\b|\bschema\b|\bsql\b|\borm\b"),
        ("api", r"\bapis?\b|\bendpoints?\b|\bhttps?\b|\brest api|graphql"),
        ("lint", r"\blint|\bruff\b|\beslint\b|\bflake8\b|\bmypy\b"),
        ("formatting", r"\bformat(?:ting|ter)?\b|\bprettier\b"),
        ("security", r"\bsecrets?\b|\bcredentials?\b|\bpasswords?\b|\bauth\b|\bvpn\b"),
        ("dependencies", r"\bdependenc|\blockfile|\bpin(?:ned|ning)?\b"),
    )
)


def auto_tags(content: str, memory_type: str) -> list[str]:
    """A few lowercase keyword tags (known tech words, then the memory type), all valid
    for the store, so memories can be filtered without an LLM."""
    tags = [tag for tag, pattern in TECH_TAGS if pattern.search(content)][:MAX_TECH_TAGS]
    return valid_tags([*tags, memory_type])


def valid_tags(tags: Iterable[str]) -> list[str]:
    out: list[str] = []
    for tag in tags:
        try:
            out.extend(t for t in normalize_tags([tag]) if t not in out)
        except ValidationError:
            continue
    return out


# -- candidates ---------------------------------------------------------------------------


_STOPWORDS = word_set(
    "the and for are but not you all any can her was one our out has have his how its may "
    "new now old see two way who did get let put say she too use that this with from they "
    "will what when your which their there than them then these those into just also is "
    "token key password secret value"
)


def _clean_content(content: str) -> str | None:
    """Private spans out, credentials redacted; None if too little meaning is left."""
    text = strip_private(content)
    redacted = redact_transcript(text)
    if redacted != text:
        meaningful = [
            w
            for w in words(redacted.replace(REDACTED, " "))
            if len(w) > 2 and w.lower() not in _STOPWORDS
        ]
        if len(meaningful) < MIN_WORDS:
            return None
    text = " ".join(redacted.split())
    return text if len(words(text)) >= MIN_WORDS else None


def finalize_candidates(candidates: Iterable[Candidate]) -> list[Candidate]:
    """The gate every candidate passes before it is stored, whatever produced it:
    registered type, clean content (no private spans, no credentials, at most 10,000
    characters), valid tags, confidence in [0, 1], duplicates (by normalized text)
    merged into the first one, which keeps the highest confidence of them."""
    out: list[Candidate] = []
    seen: dict[str, Candidate] = {}
    for cand in candidates:
        if not isinstance(cand.type, str) or not isinstance(cand.content, str):
            continue  # a model's malformed output
        try:
            kind = check_memory_type(cand.type)
        except ValidationError:
            continue
        content = _clean_content(cand.content)
        if not content:
            continue
        content = content[:MAX_CONTENT_CHARS]
        key = normalize_key(content)
        ids = [i for i in cand.source_message_ids or () if isinstance(i, str)]
        try:
            confidence = min(1.0, max(0.0, float(cand.confidence)))
        except (TypeError, ValueError):
            continue
        if key in seen:
            first = seen[key]
            first.source_message_ids.extend(i for i in ids if i not in first.source_message_ids)
            del first.source_message_ids[MAX_LIST_ITEMS:]
            first.confidence = max(first.confidence, confidence)
            continue
        tags = valid_tags([*(cand.tags or ()), *auto_tags(content, kind)])[:MAX_TAGS] or [kind]
        clean = Candidate(
            type=kind,
            content=content,
            confidence=confidence,
            tags=tags,
            scope="global" if cand.scope == "global" else "project",
            source_message_ids=list(dict.fromkeys(ids))[:MAX_LIST_ITEMS],
            replaces=cand.replaces if isinstance(cand.replaces, str) else None,
        )
        seen[key] = clean
        out.append(clean)
    return out


def split_candidates(candidates: Iterable[Candidate]) -> Extraction:
    """Finalized candidates parted by `MIN_CONFIDENCE`: the sure ones become memories, the
    others go to the inbox (without ``replaces``: only a memory marks others stale)."""
    out = Extraction()
    for cand in candidates:
        if cand.confidence >= MIN_CONFIDENCE:
            out.memories.append(cand)
        else:
            cand.replaces = None
            out.inbox.append(cand)
    return out
