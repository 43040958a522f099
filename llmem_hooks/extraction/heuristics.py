"""The heuristic extractor: memories people state on purpose, found by patterns.

It only picks up statements made deliberately ("remember that ...", "we decided ...",
"always ...", "I prefer ...", explicit how-tos): a missed memory costs little, a wrong
one is injected into every later session. No model, deterministic, and it always runs
(`engine.ExtractionEngine` adds a model's candidates to its own).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from ..events import Message
from ..store import MAX_CONTENT_CHARS
from .candidates import (
    MIN_WORDS,
    Candidate,
    Scope,
    finalize_candidates,
    word_set,
    words,
)
from .transcript import speech_lines, split_sentences

CONFIDENCE_REMEMBER = 0.9
CONFIDENCE_DECISION = 0.85
CONFIDENCE_RULE = 0.8  # always / never
CONFIDENCE_PREFERENCE = 0.8
CONFIDENCE_HOWTO = 0.8

# -- sentence shapes ----------------------------------------------------------------------

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


def _finish(text: str) -> str | None:
    """A clean standalone sentence: trimmed, capitalized, ending with a period; None for
    questions and fragments."""
    text = " ".join(text.split()).strip(" \t*")
    if not text or text.endswith("?"):
        return None
    text = re.sub(r"[\s,;:.!…—-]+$", "", text)
    if len(words(text)) < MIN_WORDS:
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

_PAST_IRREGULAR = word_set(
    "did had was were got knew thought made went saw found said ran wrote told took gave "
    "came became kept left meant met paid sent sat stood understood forgot broke chose "
    "spoke"
)
_ED_VERBS = word_set("need feed seed proceed exceed embed shed speed bleed succeed")
# Words after always/never that describe what happens rather than prescribe what to do.
_NOT_RULE_VERBS = word_set(
    "the a an this that it its so too mind ever again really been sure true false seem get "
    "forget end hit break lose miss struggle fail mess screw have know think wonder feel "
    "want wish hate love like say talk argue complain happen work enough"
)
_PROCEDURE_VERBS = word_set(
    "run execute build test deploy release commit push pull rebase merge squash squash-merge "
    "restart rebuild install migrate check lint format update bump tag backup source "
    "activate pin lock review start stop reset clean seed rotate regenerate verify call "
    "compile bundle publish ship roll rollback"
)
_PREFERENCE_VERBS = word_set(
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
