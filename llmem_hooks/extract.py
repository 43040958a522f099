"""Turning session transcripts into memory candidates, summaries and self-assessments.

`ExtractionEngine` is what the session hooks call. It always runs `HeuristicExtractor`,
which only picks up statements people make on purpose ("remember that ...", "we decided
...", "always ...", "I prefer ...", explicit how-tos): a missed memory costs little, a
wrong one is injected into every later session. A model-backed `Extractor`
(`llm_extract.OllamaExtractor`) adds its candidates to the heuristics' when it can run;
whatever produces candidates, `finalize_candidates` is the one gate they all pass
(private spans, credentials, type, tags, length, duplicates).

Transcript text comes as ``User: ...`` / ``Assistant: ...`` lines with ``Reasoning:``,
``Tool: <name>`` and ``Patch`` blocks (see `llmem_hooks.events.Message`); only spoken
lines are mined, never tool output, reasoning, patches, code fences or quotes.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from .errors import ValidationError
from .events import Message
from .redact import REDACTED, redact_secrets, strip_private
from .registry import check_memory_type
from .store import MAX_CONTENT_CHARS, normalize_tags

log = logging.getLogger(__name__)

Scope = Literal["project", "global"]
LineKind = Literal["speech", "code", "tool", "reasoning", "patch", "error"]

CONFIDENCE_REMEMBER = 0.9
CONFIDENCE_DECISION = 0.85
CONFIDENCE_RULE = 0.8  # always / never
CONFIDENCE_PREFERENCE = 0.8
CONFIDENCE_HOWTO = 0.8
MIN_WORDS = 3
MAX_TECH_TAGS = 5


@dataclass
class Candidate:
    """A memory the extractor proposes; the session hooks store it as is."""

    type: str
    content: str
    confidence: float
    tags: list[str] = field(default_factory=list)
    scope: Scope = "project"
    source_message_ids: list[str] = field(default_factory=list)


@dataclass
class Assessment:
    """A session-end ``self_assessment`` memory: text, tags, metadata and who made it
    (``"ollama"`` or ``"heuristic: <why not the model>"``)."""

    content: str
    tags: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    assessed_by: str = "heuristic"


class Extractor(Protocol):
    """Anything that proposes memories from messages (`HeuristicExtractor`,
    `llm_extract.OllamaExtractor`)."""

    def extract(
        self, messages: Sequence[Message], *, project: str | None = None
    ) -> list[Candidate]: ...


# -- transcript parsing -------------------------------------------------------------------


@dataclass(frozen=True)
class TranscriptLine:
    """One line of a message, with the kind of block it belongs to."""

    kind: LineKind
    text: str


_SPEAKER = re.compile(r"^(?:User|Assistant):[ \t]?(.*)$")
_MARKERS: tuple[tuple[LineKind, re.Pattern[str]], ...] = (
    ("reasoning", re.compile(r"^Reasoning:")),
    ("tool", re.compile(r"^Tool:")),
    ("patch", re.compile(r"^Patch(?:\s*$|:)")),
    ("error", re.compile(r"^Error:")),  # a failed model call; only right after a speaker
)


def _marker(text: str, *, after_speaker: bool) -> LineKind | None:
    for kind, pattern in _MARKERS:
        if pattern.match(text) and (after_speaker or kind != "error"):
            return kind
    return None


def transcript_lines(message: Message) -> list[TranscriptLine]:
    """The message's lines (private spans removed, speaker prefixes dropped), each tagged
    speech / code / tool / reasoning / patch / error.

    A block marker may follow the speaker (OpenCode: ``Assistant: Tool: bash: make lint
    [error]``) or start a line of its own; unprefixed lines continue the block above them,
    and a message without any prefix is all speech.
    """
    out: list[TranscriptLine] = []
    kind: LineKind = "speech"
    for raw in strip_private(message.text).splitlines():
        speaker = _SPEAKER.match(raw)
        if speaker:
            raw = speaker.group(1)
            kind = _marker(raw, after_speaker=True) or "speech"
        else:
            kind = _marker(raw, after_speaker=False) or kind
        if kind in ("speech", "code") and raw.lstrip().startswith("```"):
            kind = "code" if kind == "speech" else "speech"
            continue
        out.append(TranscriptLine(kind, raw))
    return out


def speech_lines(message: Message) -> list[str]:
    """The spoken lines of a message, without prefixes, tool output or code blocks."""
    return [line.text for line in transcript_lines(message) if line.kind == "speech"]


_ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "cf.", "approx.", "incl.", "no.")
_SENTENCE_END = re.compile(r"[.!?]+[\"')\]]*\s+")


def split_sentences(line: str) -> list[str]:
    """Sentences of one line; a period after a common abbreviation does not end one."""
    out: list[str] = []
    start = 0
    for m in _SENTENCE_END.finditer(line):
        head = line[start : m.end()].rstrip()
        if head.lower().endswith(_ABBREVIATIONS):
            continue
        out.append(head)
        start = m.end()
    tail = line[start:].strip()
    if tail:
        out.append(tail)
    return [s.strip() for s in out if s.strip()]


# -- content helpers ----------------------------------------------------------------------

_WORD = re.compile(r"[A-Za-z0-9][\w'./+#-]*")
_FILLER = re.compile(
    r"^(?:(?:ok(?:ay)?|also|and|but|btw|by the way|oh|fyi|so|hey|alright|right|yes|yeah|"
    r"sure|thanks|thank you|great|cool|perfect|nice|one more thing|important|heads up|"
    r"note(?=\s*:)|ps)\b\s*[,:;!.\-—]*\s*)+",
    re.I,
)
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+")
_QUESTION_START = re.compile(
    r"^(?:should|shall|can|could|would|will|do|does|did|is|are|was|were|have|has|had|"
    r"what|why|how|which|who|whom|whose|when|where|"
    r"isn't|aren't|am)\b",
    re.I,
)
_TODO = re.compile(r"\b(?:TODO|FIXME)\b")
_CHECKBOX = re.compile(r"^\s*[-*+]\s+\[[ xX✓]\]")
# A phrase made only of these, or (for decisions and preferences) starting with one,
# depends on context the memory will not have: "let's go with it", "I prefer this one".
_VAGUE_ALL = re.compile(
    r"^(?:(?:it|this|that|these|those|them|whatever|whichever|either|neither|both|one|ones|"
    r"option|the|first|second|third|last|former|latter|other|yours|mine|nothing|anything|"
    r"something|not|yet|so|too|then|instead|now|please|better|more|much|lot|way|[a-z])\b"
    r"[\s.!,]*)+$",
    re.I,
)
_VAGUE_REF = re.compile(
    r"^(?:it|this|these|those|them|whatever|whichever|either|neither|option|"
    r"the (?:former|latter|first|second|other)(?: one)?)\b",
    re.I,
)
_WH_START = re.compile(r"^(?:what|when|how|why|where|which|who|whether|if)\b", re.I)


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


def _words(text: str) -> list[str]:
    return _WORD.findall(text)


def _normalize_key(text: str) -> str:
    """Case, punctuation and spacing folded: the identity used to drop duplicates."""
    return " ".join(re.sub(r"[^\w]+", " ", text.lower()).split())


def _finish(text: str) -> str | None:
    """A clean standalone sentence: trimmed, capitalized, ending with a period; None for
    questions and fragments."""
    text = " ".join(text.split()).strip(" \t*")
    if not text or text.endswith("?"):
        return None
    text = re.sub(r"[\s,;:.!…—-]+$", "", text)
    if len(_words(text)) < MIN_WORDS:
        return None
    if text[0].islower():
        text = text[0].upper() + text[1:]
    if len(text) >= MAX_CONTENT_CHARS:  # the store's limit; keep whole words
        cut = text[: MAX_CONTENT_CHARS - 4]
        return (cut.rsplit(" ", 1)[0] if " " in cut else cut) + " ..."
    return text + "."


def _is_question(sentence: str) -> bool:
    return sentence.rstrip().endswith("?") or bool(_QUESTION_START.match(sentence))


def _vague(body: str, *, leading: bool = True) -> bool:
    """Whether ``body`` only points at something said before (``leading``: also when it
    starts with such a reference)."""
    body = body.strip()
    return bool(_VAGUE_ALL.match(body) or (leading and _VAGUE_REF.match(body)))


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
    return _valid_tags([*tags, memory_type])


def _valid_tags(tags: Iterable[str]) -> list[str]:
    out: list[str] = []
    for tag in tags:
        try:
            out.extend(t for t in normalize_tags([tag]) if t not in out)
        except ValidationError:
            continue
    return out


# -- the patterns -------------------------------------------------------------------------

# *Remember*: / **Remember**: anywhere in a line; a bare Remember: only at its start.
_REMEMBER_MARK = re.compile(
    r"(?:(?<![\w*])(?:\*\*|\*|__|_)remember(?:\s*:)?(?:\*\*|\*|__|_)\s*:?|^remember\s*:)"
    r"\s*(?P<body>.*)$",
    re.I,
)
_REMEMBER_SAY = re.compile(
    r"^(?:(?:can|could|would|will) you (?:please )?|please )?"
    r"(?:remember|keep in mind|don'?t forget|do not forget)(?:\s*,)?\s+(?:that\s+)?(?P<body>.+)$",
    re.I,
)
_DECISION_LABEL = re.compile(
    r"^(?:\*\*|\*|__)?(?:final )?(?:decision|decided)(?:\s*:)?(?:\*\*|\*|__)?\s*:?\s+"
    r"(?P<body>.+)$",
    re.I,
)
_DECISION_SAY = re.compile(
    r"^(?P<trigger>we(?:'ve| have)? (?:decided|agreed) (?:to|that|on|against)"
    r"|we(?:'ve| have)? settled on"
    r"|we(?:'re| are) going with"
    r"|we(?:'ll| will) (?:go|stick) with"
    r"|let'?s (?:go|stick) with"
    r"|(?:we(?:'ll| will|'re going to| are going to)|let'?s) "
    r"(?:use|switch to|move to|migrate to|standardize on)(?=.+\b(?:instead of|rather than)\b))"
    r"\b(?P<body>.*)$",
    re.I,
)
_PREFERENCE_SAY = re.compile(
    r"^I(?:'d| would)? (?P<adv>(?:really |strongly |generally |usually |much |definitely )*)"
    r"(?P<verb>prefer|rather|like)\s+(?P<body>.+)$",
    re.I,
)
_RULE_SAY = re.compile(
    r"^(?:please,?\s+)?(?:(?P<you>you (?:should|must|need to|have to)\s+)"
    r"|(?P<we>we(?: should| must| need to| have to)?\s+))?"
    r"(?P<adverb>always|never)\s+(?P<verb>[a-z][\w'-]*)(?P<rest>.*)$",
    re.I,
)
_HOWTO_PURPOSE_FIRST = re.compile(
    r"^(?:to|for) (?P<purpose>[^,`]{3,80}),\s*(?:just |you can |you need to |you have to |"
    r"always )?(?:run|use|type|call)\s+`[^`]+`",
    re.I,
)
_HOWTO_COMMAND_FIRST = re.compile(
    r"^(?:just |you can |you need to |you have to )?(?:run|use|call)\s+`[^`]+`\s+"
    r"(?:to|for|before|after|when|whenever|whenever you|if you want to)\s+(?P<purpose>.+)$",
    re.I,
)
_HOWTO_THE_COMMAND = re.compile(
    r"^the (?:(?P<qualifier>[\w./-]+(?: [\w./-]+){0,2}) )?command"
    r"(?: (?:to|for) (?P<purpose>[^`]+?))? is:?\s+`[^`]+`",
    re.I,
)
_ONE_OFF = re.compile(
    r"^(?:see|check (?:if|whether)|verify|confirm|find out|reproduce|make sure (?:it|this))\b"
    r"|\b(?:it|this|that)\b|\bagain\b|\bnow\b",
    re.I,
)

_PAST_IRREGULAR = _wordset(
    "did had was were got knew thought made went saw found said ran wrote told took gave "
    "came became kept left meant met paid sent sat stood understood forgot broke chose "
    "spoke"
)
_ED_VERBS = _wordset("need feed seed proceed exceed embed shed speed bleed succeed")
# Words after always/never that describe what happens rather than prescribe what to do.
_NOT_RULE_VERBS = _wordset(
    "the a an this that it its so too mind ever again really been sure true false seem get "
    "forget end hit break lose miss struggle fail mess screw have know think wonder feel "
    "want wish hate love like say talk argue complain happen work enough"
)
_PROCEDURE_VERBS = _wordset(
    "run execute build test deploy release commit push pull rebase merge squash squash-merge "
    "restart rebuild install migrate check lint format update bump tag backup source "
    "activate pin lock review start stop reset clean seed rotate regenerate verify call "
    "compile bundle publish ship roll rollback"
)
_PREFERENCE_VERBS = _wordset(
    "use write prefer ask explain answer reply respond include mention add keep put name "
    "comment document show give leave be avoid say apologize summarize suggest print log "
    "type annotate sign"
)
_IMPERATIVE_START = re.compile(
    r"^(?:always|never|don'?t|do not|make sure|ensure|avoid|"
    + "|".join(sorted(_PROCEDURE_VERBS | {"use", "set", "add", "keep", "put", "call"}))
    + r")\b(?!(?:\s+\S+){0,2}\s+(?:is|are|was|were|has|have|can|should|must|will|needs|"
    r"lives|runs|takes|uses|requires|depends|goes)\b)",
    re.I,
)


def _is_base_verb(word: str) -> bool:
    """Whether ``word`` can be the base-form verb of a rule ("always *run* ...")."""
    w = word.lower().rstrip(",.;:")
    if not w or w in _NOT_RULE_VERBS or w in _PAST_IRREGULAR:
        return False
    if w.endswith("ed") and w not in _ED_VERBS:
        return False  # past tense: a story, not a rule ("we never decided ...")
    if w.endswith("ing") and w not in ("bring",):
        return False
    return not (w.endswith("s") and not w.endswith("ss"))  # "always fails" is a report


def _preference_sentence(m: re.Match[str]) -> str | None:
    body = m.group("body").strip()
    verb = m.group("verb").lower()
    adv = m.group("adv").lower()
    if verb == "rather":
        if re.match(r"(?i)^not\b[\s.!]*$", body):
            return None
        return f"User would {adv}rather {body}"
    if verb == "like":
        if not re.search(r"(?i)\b(?:better|more)\b", body) or body.lower().startswith("to "):
            return None
        return f"User {adv}likes {body}"
    return f"User {adv}prefers {body}"


def _classify(body: str) -> tuple[str, Scope]:
    """Type and scope for an explicitly remembered statement."""
    lowered = body.lower()
    if re.match(r"^(?:user|i)(?:'d| would)? (?:\w+ )?(?:prefers?|rather)\b", lowered):
        return "preference", "global"
    if _DECISION_SAY.match(body) or _DECISION_LABEL.match(body):
        return "decision", "project"
    if _IMPERATIVE_START.match(body) or re.match(r"^we (?:always|never)\b", lowered):
        return "procedure", "project"
    return "fact", "project"


def _rewrite_first_person_preference(body: str) -> str:
    m = _PREFERENCE_SAY.match(body)
    return (_preference_sentence(m) or body) if m else body


@dataclass(frozen=True)
class _Hit:
    type: str
    content: str
    confidence: float
    scope: Scope


def _remember_hit(body: str) -> _Hit | None:
    body = _FILLER.sub("", body.strip())
    if not body or _WH_START.match(body) or _TODO.match(body) or _vague(body, leading=False):
        return None
    body = re.sub(r"(?i)^to\s+(?=\w)", "", body)  # "remember to run X" -> "Run X"
    kind, scope = _classify(body)
    if kind == "preference":
        body = _rewrite_first_person_preference(body)
    content = _finish(body)
    return _Hit(kind, content, CONFIDENCE_REMEMBER, scope) if content else None


def _sentence_hit(sentence: str) -> _Hit | None:
    """The memory one spoken user sentence states, if it states one on purpose."""
    s = _FILLER.sub("", sentence.strip())
    if not s:
        return None
    m = _REMEMBER_SAY.match(s)
    if m:  # "can you remember that X?" is a request, not a question
        return _remember_hit(m.group("body").rstrip("?").strip())
    if _is_question(s) or _TODO.search(s):
        return None
    if _DECISION_LABEL.match(s):
        return _label_hit(s)
    m = _DECISION_SAY.match(s)
    if m:
        if not m.group("body").strip() or _vague(m.group("body")):
            return None
        content = _finish(s)
        return _Hit("decision", content, CONFIDENCE_DECISION, "project") if content else None
    m = _PREFERENCE_SAY.match(s)
    if m:
        if _vague(m.group("body")):
            return None
        text = _preference_sentence(m)
        content = _finish(text) if text else None
        return _Hit("preference", content, CONFIDENCE_PREFERENCE, "global") if content else None
    m = _RULE_SAY.match(s)
    if m and _is_base_verb(m.group("verb")):
        return _rule_hit(s, m)
    return _howto_hit(s)


def _label_hit(sentence: str) -> _Hit | None:
    """A ``Decision: ...`` label, which counts from either role."""
    m = _DECISION_LABEL.match(_FILLER.sub("", sentence.strip()))
    if not m or _vague(m.group("body")) or _is_question(m.group("body")):
        return None
    content = _finish(m.group("body"))
    return _Hit("decision", content, CONFIDENCE_DECISION, "project") if content else None


def _rule_hit(sentence: str, m: re.Match[str]) -> _Hit | None:
    if m.group("you"):  # "you should always X" -> "Always X"
        text = sentence[m.start("adverb") :]
    else:
        text = re.sub(r"(?i)^please,?\s+", "", sentence)
    content = _finish(text)
    if not content:
        return None
    verb = m.group("verb").lower()
    concrete = "`" in sentence or bool(re.search(r"\w/\w|\.\w{1,4}\b", m.group("rest")))
    if m.group("we") or verb in _PROCEDURE_VERBS or concrete or verb not in _PREFERENCE_VERBS:
        return _Hit("procedure", content, CONFIDENCE_RULE, "project")
    return _Hit("preference", content, CONFIDENCE_RULE, "global")


def _howto_hit(sentence: str) -> _Hit | None:
    m = (
        _HOWTO_PURPOSE_FIRST.match(sentence)
        or _HOWTO_COMMAND_FIRST.match(sentence)
        or _HOWTO_THE_COMMAND.match(sentence)
    )
    if not m:
        return None
    purpose = (m.groupdict().get("purpose") or "").strip()
    qualifier = m.groupdict().get("qualifier")
    if m.re is _HOWTO_THE_COMMAND and not (purpose or qualifier):
        return None  # "the command is `x`": for what? not standalone
    if purpose and _ONE_OFF.search(purpose):
        return None  # "run `npm test` to see if it passes" is a request for now
    content = _finish(re.sub(r"(?i)^just\s+", "", sentence))
    return _Hit("procedure", content, CONFIDENCE_HOWTO, "project") if content else None


def _statement_lines(message: Message) -> Iterator[tuple[str, bool]]:
    """(line, continues_paragraph) for the spoken lines worth reading: bullets stripped;
    quotes, checkboxes, headings and TODO lines skipped."""
    previous_blank = True
    for raw in speech_lines(message):
        line = raw.strip()
        if not line:
            previous_blank = True
            continue
        skip = line.startswith((">", "#", "|")) or _CHECKBOX.match(line) or _TODO.match(line)
        if not skip:
            yield _BULLET.sub("", line), not previous_blank
        previous_blank = False


# A line that starts a new labelled item ("Decision: ...", "**Note:** ...") ends a note.
_LABEL = re.compile(r"^(?:\*\*|__)?[A-Za-z][\w -]{0,24}:?(?:\*\*|__)?:\s")


def _marker_hit(lines: Sequence[tuple[str, bool]], i: int) -> tuple[_Hit | None, int]:
    """The ``*Remember*: ...`` note starting on line ``i`` (from either role) and how many
    lines it spans: it runs to the end of its paragraph or the next labelled line."""
    m = _REMEMBER_MARK.search(lines[i][0])
    parts = [m.group("body")] if m else []
    for nxt, continues in lines[i + 1 :]:
        if not continues or _REMEMBER_MARK.search(nxt) or _LABEL.match(nxt):
            break
        parts.append(nxt)
    sentences = split_sentences(" ".join(parts))
    body = " ".join(s for s in sentences if not s.rstrip().endswith("?"))
    return (_remember_hit(body) if body else None), len(parts)


def _message_hits(message: Message) -> Iterator[_Hit]:
    lines = list(_statement_lines(message))
    i = 0
    while i < len(lines):
        line = lines[i][0]
        if _REMEMBER_MARK.search(line):
            hit, used = _marker_hit(lines, i)
            i += max(used, 1)
            if hit:
                yield hit
            continue
        i += 1
        for sentence in split_sentences(line):
            # An assistant's own claims are not the user's decisions; its labels are.
            hit = _sentence_hit(sentence) if message.role == "user" else _label_hit(sentence)
            if hit:
                yield hit


# -- candidates ---------------------------------------------------------------------------


_STOPWORDS = _wordset(
    "the and for are but not you all any can her was one our out has have his how its may "
    "new now old see two way who did get let put say she too use that this with from they "
    "will what when your which their there than them then these those into just also is "
    "token key password secret value"
)


def _clean_content(content: str) -> str | None:
    """Private spans out, credentials redacted; None if too little meaning is left."""
    text = strip_private(content)
    redacted = redact_secrets(text)
    if redacted is None:
        return None
    if redacted != text:
        meaningful = [
            w
            for w in _words(redacted.replace(REDACTED, " "))
            if len(w) > 2 and w.lower() not in _STOPWORDS
        ]
        if len(meaningful) < MIN_WORDS:
            return None
    text = " ".join(redacted.split())
    return text if len(_words(text)) >= MIN_WORDS else None


def finalize_candidates(candidates: Iterable[Candidate]) -> list[Candidate]:
    """The gate every candidate passes before it is stored, whatever produced it:
    registered type, clean content (no private spans, no credentials, at most 10,000
    characters), valid tags, confidence in [0, 1], duplicates (by normalized text)
    merged into the first one."""
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
        key = _normalize_key(content)
        ids = [i for i in cand.source_message_ids or () if isinstance(i, str)]
        if key in seen:
            first = seen[key]
            first.source_message_ids.extend(i for i in ids if i not in first.source_message_ids)
            continue
        try:
            confidence = min(1.0, max(0.0, float(cand.confidence)))
        except (TypeError, ValueError):
            continue
        tags = _valid_tags([*(cand.tags or ()), *auto_tags(content, kind)]) or [kind]
        clean = Candidate(
            type=kind,
            content=content,
            confidence=confidence,
            tags=tags,
            scope="global" if cand.scope == "global" else "project",
            source_message_ids=list(dict.fromkeys(ids)),
        )
        seen[key] = clean
        out.append(clean)
    return out


class HeuristicExtractor:
    """Pattern-based extraction: no model, deterministic, and deliberately conservative.

    User messages: "remember that / please remember / don't forget / keep in mind ...",
    "we decided / agreed ...", "Decision: ...", "let's go with ...", "we'll use X instead
    of Y", "I prefer / I'd rather / I like X better ...", "always / never ..." rules and
    how-tos framed around a backticked command. Both roles: ``*Remember*: ...`` notes and
    ``Decision: ...`` labels. Questions, hypotheticals, past-tense stories, TODOs, quotes,
    code, tool output and reasoning never become memories.
    """

    name = "heuristic"

    def extract(
        self, messages: Sequence[Message], *, project: str | None = None
    ) -> list[Candidate]:
        """Candidates in the order they were said (``project`` is for extractors that
        use it, such as a model prompt; the patterns do not need it)."""
        raw: list[Candidate] = []
        for message in messages:
            for hit in _message_hits(message):
                raw.append(
                    Candidate(
                        type=hit.type,
                        content=hit.content,
                        confidence=hit.confidence,
                        tags=[],
                        scope=hit.scope,
                        source_message_ids=[message.id],
                    )
                )
        return finalize_candidates(raw)


class ExtractionEngine:
    """What the session hooks call to turn new messages into memory candidates.

    The heuristics always run; a model extractor (e.g. `llm_extract.OllamaExtractor`),
    when given, runs too and its candidates are added to theirs, so explicit "remember
    that ..." notes survive a model that misses them. If the model cannot run (no server,
    timeout, missing model, budget spent) the heuristics' candidates are the result.
    Every result passes `finalize_candidates`.

    ``last_run`` says which extractor produced the last result and why: ``"ollama: ..."``
    or ``"heuristic: <reason>"``; ``last_assessment`` the same for `assess_session`.
    """

    def __init__(self, extractor: Extractor | None = None, *, reason: str | None = None) -> None:
        self.heuristic = HeuristicExtractor()
        self.extractor: Extractor = extractor or self.heuristic
        self.reason = reason or ("no model configured" if extractor is None else "")
        self.last_run = ""
        self.last_assessment = ""

    @property
    def uses_model(self) -> bool:
        return self.extractor is not self.heuristic

    def check_available(self) -> bool:
        """Whether extraction can run (the heuristics always can)."""
        return True

    def extract(
        self, messages: Sequence[Message], *, project: str | None = None
    ) -> list[Candidate]:
        found = self.heuristic.extract(messages, project=project)
        if not self.uses_model:
            self.last_run = f"heuristic: {self.reason}"
            return found
        try:
            model = self.extractor.extract(messages, project=project)
        except Exception as exc:
            self.last_run = f"heuristic: {_reason(exc)}"
            log.info("extraction fell back to the heuristics: %s", _reason(exc))
            return found
        name = getattr(self.extractor, "name", type(self.extractor).__name__)
        self.last_run = getattr(self.extractor, "last_status", "") or str(name)
        return finalize_candidates([*found, *model])

    def assess_session(
        self, messages: Sequence[Message], *, session_key: str | None = None
    ) -> Assessment | None:
        """The session-end self-assessment: the model's when the extractor can make one,
        else the plain-text counts of `self_assessment`; None for an empty session."""
        if not messages:
            return None
        assess = getattr(self.extractor, "assess", None) if self.uses_model else None
        reason = self.reason
        if assess is not None:
            try:
                result: Assessment = assess(messages, session_key=session_key)
                self.last_assessment = result.assessed_by
                return result
            except Exception as exc:
                reason = _reason(exc)
                log.info("self-assessment without the model: %s", reason)
        elif self.uses_model:
            reason = "the extractor cannot assess sessions"
        self.last_assessment = f"heuristic: {reason}"
        text = self_assessment(messages)
        return Assessment(text, ["self-assessment"], {}, self.last_assessment) if text else None


def _reason(exc: BaseException) -> str:
    """An exception as one short line for ``last_run`` and logs (our errors carry their
    own wording; anything else is named by its type)."""
    from .errors import LLMemError

    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if isinstance(exc, LLMemError) and text:
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# -- session summary and self-assessment --------------------------------------------------

_SMALL_TALK = _wordset(
    "hi hello hey thanks thank you ok okay yes no continue go on go ahead proceed sure "
    "yep nope cool great"
)
SUMMARY_MAX_CHARS = 600
_ERROR_LINE = re.compile(r"(?i)\berror|\bfailed\b|\bfailure\b|\btraceback\b")
_NO_ERROR_LINE = re.compile(r"(?i)\b(?:0|no|zero) (?:errors?|failed|failures)\b")


def one_line(text: str, limit: int) -> str:
    """Whitespace collapsed and cut at a word boundary to at most ``limit`` characters."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 3].rsplit(" ", 1)[0] or text[: limit - 3]
    return cut.rstrip(" ,;:") + "..."


def safe_text(text: str) -> str:
    """Private spans gone and credentials redacted; empty when nothing safe is left."""
    redacted = redact_secrets(strip_private(text))
    return redacted or ""


def session_goal(messages: Sequence[Message], limit: int = 500) -> str:
    """The first real user request: the first user message that is not small talk or a
    bare slash command, on one line."""
    for message in messages:
        if message.role != "user":
            continue
        text = safe_text("\n".join(speech_lines(message)))
        words = _normalize_key(text)
        if not words or words in _SMALL_TALK or re.fullmatch(r"/\S+", text.strip()):
            continue
        if all(w in _SMALL_TALK for w in words.split()):
            continue
        return one_line(text, limit)
    return ""


def unique_recent(items: Iterable[str], limit: int) -> list[str]:
    """Distinct items in order of their last occurrence, the last ``limit`` of them."""
    order: dict[str, None] = {}
    for item in items:
        item = item.strip()
        if item:
            order.pop(item, None)
            order[item] = None
    return list(order)[-limit:] if limit > 0 else []


def _files(messages: Sequence[Message]) -> list[str]:
    return [f for f in (safe_text(f) for m in messages for f in m.files) if f.strip()]


def _commands(messages: Sequence[Message]) -> list[str]:
    return [c for c in (safe_text(c) for m in messages for c in m.commands) if c.strip()]


def _listing(items: Sequence[str], shown: int) -> str:
    head = ", ".join(one_line(i, 80) for i in items[:shown])
    more = len(items) - shown
    return f"{head} (+{more} more)" if more > 0 else head


def _count(n: int, singular: str, plural: str | None = None) -> str:
    return f"{n} {singular if n == 1 else plural or singular + 's'}"


def summarize_session(messages: Sequence[Message]) -> str:
    """A short plain-text summary of the session for its ``event`` memory: the goal,
    how many turns, which files and commands. At most 600 characters."""
    users = sum(1 for m in messages if m.role == "user")
    replies = len(messages) - users
    goal = session_goal(messages, limit=200) or "unknown"
    files = unique_recent(_files(messages), 1000)
    commands = unique_recent(_commands(messages), 1000)
    parts = [
        f"Session summary. Goal: {goal.rstrip('.!')}",
        f"{_count(users, 'user turn')}, {_count(replies, 'assistant reply', 'assistant replies')}",
    ]
    if files:
        parts.append(f"{_count(len(files), 'file')} touched: {_listing(files, 5)}")
    if commands:
        parts.append(f"{_count(len(commands), 'command')} run: {_listing(commands, 3)}")
    return one_line(". ".join(parts) + ".", SUMMARY_MAX_CHARS)


def _is_error(line: str) -> bool:
    return bool(_ERROR_LINE.search(line)) and not _NO_ERROR_LINE.search(line)


def _tool_calls(message: Message) -> list[bool]:
    """For each tool call of the message, in order, whether it failed: its line says
    ``[error]`` (OpenCode) or its printed output has an error line. A failed model call
    (``Error: ...``) counts as one more failure."""
    calls: list[bool] = []
    for line in transcript_lines(message):
        if line.kind == "error" and line.text.startswith("Error:"):
            calls.append(True)
        elif line.kind == "tool" and line.text.startswith("Tool:"):
            calls.append(line.text.rstrip().endswith("[error]"))
        elif line.kind == "tool" and calls and _is_error(line.text):
            calls[-1] = True
    return calls


def self_assessment(messages: Sequence[Message]) -> str:
    """The degraded (no model) ``self_assessment`` text: counts only, no judgement.

    Tool errors are failed tool calls (and failed model calls) as the transcript shows
    them. "completed" only means the agent had the last word and its last tool call did
    not fail, not that the goal was met; anything else is "unclear".
    """
    if not messages:
        return ""
    turns = sum(1 for m in messages if m.role == "user")
    errors = sum(sum(_tool_calls(m)) for m in messages)
    files = unique_recent(_files(messages), 1000)
    last = messages[-1]
    done = last.role == "assistant" and not (_tool_calls(last) or [False])[-1]
    text = (
        f"Session self-assessment (heuristic): {_count(turns, 'turn')}, "
        f"{_count(errors, 'tool error')} seen, "
        f"files touched: {_listing(files, 5) if files else 'none'}, "
        f"outcome: {'completed' if done else 'unclear'}."
    )
    return one_line(text, SUMMARY_MAX_CHARS)
