"""The heuristic extractor: memories people state on purpose, found by patterns.

It only picks up statements made deliberately ("remember that ...", "we decided ...",
"always ...", "I prefer ...", explicit how-tos): a missed memory costs little, a wrong
one is injected into every later session. No model, deterministic, and it always runs
(`engine.ExtractionEngine` adds a model's candidates to its own).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

from ..events import Message
from ..redact import redact_key_blocks
from ..store import MAX_CONTENT_CHARS
from .candidates import (
    MIN_WORDS,
    Candidate,
    Extraction,
    Scope,
    finalize_candidates,
    split_candidates,
    word_set,
    words,
)
from .smalltalk import is_small_talk
from .supersede import replaced_term
from .transcript import speech_lines, split_sentences

CONFIDENCE_REMEMBER = 0.9
CONFIDENCE_DECISION = 0.85
CONFIDENCE_RULE = 0.8  # always / never
CONFIDENCE_PREFERENCE = 0.8
CONFIDENCE_HOWTO = 0.8
# An unmarked statement of how things are ("The broker is RabbitMQ 3.12."): maybe durable,
# maybe a remark of the moment. Below `candidates.MIN_CONFIDENCE`: it goes to the inbox,
# and becomes a memory only when a later session says it again (or a model confirms it).
CONFIDENCE_TENTATIVE = 0.4

# -- sentence shapes ----------------------------------------------------------------------

_FILLER = re.compile(
    r"^(?:(?:ok(?:ay)?|also|and|but|btw|by the way|oh|so|hey|alright|right|yes|yeah|quick|"
    r"sure|thanks|thank you|great|cool|perfect|nice|one more thing|ps)\b\s*[,:;!.\-—]*\s*)+",
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
    if sentence.rstrip().endswith("?"):
        return True
    # "When you add a dependency, update the lockfile" is a rule, not a question
    return bool(_QUESTION_START.match(sentence)) and not _WHEN_RULE.match(sentence)


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
    r"^(?:(?:can|could|would|will) you (?:please )?|please |i want you to |i'd like you to )?"
    r"(?:remember|keep in mind|bear in mind|don'?t forget|do not forget)"
    r"(?!\s+(?:this|that)\s*(?:[:,;—]|-(?!-)))"
    r"(?:\s*,)?\s+(?:that\s+)?(?P<body>.+)$",
    re.I,
)
_DECISION_LABEL = re.compile(
    r"^(?:\*\*|\*|__)?(?:final )?(?:decision|decided)(?:\s*:)?(?:\*\*|\*|__)?\s*:?\s+"
    r"(?P<body>.+)$",
    re.I,
)
_DECISION_SAY = re.compile(
    r"^(?P<trigger>(?:we|the team|everyone|we all)(?:'ve| have)? (?:decided|agreed) "
    r"(?:to|that|on|against)"
    r"|the decision is (?:to|that)"
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
    r"^the (?:(?P<qualifier>[\w./-]+(?: [\w./-]+){0,2}) )?(?:command|script|target|task|alias)"
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
    if re.match(
        r"^(?:user|i)(?:'d| would)? (?:\w+ )?(?:prefers?|rather|like|love|hate|want)\b", lowered
    ):
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
    replaces: bool = False  # a change of state ("we moved from X to Y")


def _remember_hit(body: str) -> _Hit | None:
    if is_small_talk(body):
        return None  # "Remember: thank you so much!" (checked before the filler goes)
    body = _FILLER.sub("", body.strip())
    if not body or _WH_START.match(body) or _TODO.match(body) or _vague(body, leading=False):
        return None
    if _REMINISCE.match(body) or _DEICTIC.search(body) or _HEDGE.search(body):
        return None  # "remember when ...", "remember to close the handle in this function"
    if re.match(r"(?i)^to\s+\w", body) and (not _OCCASION.search(body) or _TRANSIENT.search(body)):
        return None  # "remember to add a test": a task for now, not a standing procedure
    if re.match(r"(?i)^(?:the|an?|my|your|our)\s", body) and not _declarative(body):
        return None  # "don't forget the closing bracket"
    body = re.sub(r"(?i)^to\s+(?=\w)", "", body)  # "remember to run X" -> "Run X"
    kind, scope = _classify(body)
    if kind == "preference":
        body = _rewrite_first_person(body)
    content = _finish(body)
    return _Hit(kind, content, CONFIDENCE_REMEMBER, scope) if content else None


# -- discourse markers, clause position and mood --------------------------------------------
#
# A durable statement is often *marked* rather than phrased as a rule: a discourse marker
# before it ("FYI", "for future reference", "going forward", "just so you know",
# "important:", "note that", "make a note:") or after it ("..., remember that.", "...
# Please keep that in mind."). The marker says the speaker means it to be kept; the body
# must still be a standing statement: declarative, or a rule with its occasion, and not
# about the code at hand (deixis: "this function", "here", "on line 4") or the moment
# ("now", "yet", "again", "first"), not the speaker's own doings ("I pushed", "I'm off").

CONFIDENCE_MARKED = 0.85

_PROJECT_NOUNS = (
    r"repo|repository|project|codebase|code base|monorepo|team|company|org|organization|"
    r"app|product|service|system|stack|workspace"
)
# Pointing at the code or conversation at hand.
_DEICTIC = re.compile(
    rf"\b(?:this|these|those)\b(?!\s+(?:{_PROJECT_NOUNS})\b)"
    r"|\bhere\b|\b(?:on )?line \d+|\babove\b|\bbelow\b|\bearlier\b"
    r"|\b(?:remove|delete|fix|change|update|move|rename|in|on|at|from|of|with|into)\s+that\s+"
    r"(?!(?:the|a|an|we|our|i|you|they|it|all|every|each|there|no)\b)\w",
    re.I,
)
# Pointing at the moment rather than at how things are.
_TRANSIENT = re.compile(
    r"\b(?:now|yet|again|anymore|today|tonight|tomorrow|first|next|too|"
    r"at the moment|this time|for now|in a (?:bit|minute|sec))\b",
    re.I,
)
# When a rule applies: a standing procedure names its occasion or its frequency.
_OCCASION = re.compile(
    r"\b(?:always|never|every|each|whenever|when|after|before|any ?time|until|once|unless|"
    r"by hand|only|on (?:every|each|\w+days?))\b",
    re.I,
)
# The speaker's own doings: "I pushed the fix", "I'm going to lunch", "I can't ...".
_SPEAKER_EVENT = re.compile(
    r"^I(?:'m|'ll|'ve|'d(?! (?:rather|prefer|like))| am| will| was| have| had| just| can'?t|"
    r" cannot| don'?t| didn'?t| haven'?t| think| guess| suppose| wonder| remember|"
    r" \w+ed\b| (?:did|got|made|went|ran|wrote|put|set|broke|saw|found|said|told))\b",
    re.I,
)
_REMINISCE = re.compile(
    r"^(?:when|the time|that time|back when|last (?:week|month|year|time)|yesterday|how|what|"
    r"where|who|why|which|whether|if)\b",
    re.I,
)
_HEDGE = re.compile(
    r"\b(?:maybe|perhaps|probably|might|not sure|i wonder|i think|i guess|i suspect|"
    r"what if|try(?:ing)? (?:to )?(?:switch|mov|migrat)\w*|let'?s try)\b",
    re.I,
)

_MARK_REMEMBER = (
    r"(?:i want you to |i'd like you to |please |can you |could you )?"
    r"(?:remember|keep in mind|bear in mind|don'?t forget|do not forget|never forget)"
)
_LEAD_MARKER = re.compile(
    r"^(?:"
    rf"(?P<remember>{_MARK_REMEMBER}(?:\s+(?:this|that))?\s*(?:[:,;—]|-(?!-))\s*|remember this\s+"
    r"|worth (?:remembering|knowing)\s*(?:[:,;—]|-(?!-))\s*|(?:please )?(?:note|notice) that\s+)"
    r"|(?P<forward>(?:going forward|from now on|from here on(?: out)?|in (?:the )?future|"
    r"for (?:all )?future (?:work|sessions|changes))"
    r"(?!\s+(?:with|from|in (?:this|that)|for (?:this|that)|on (?:this|that))\b)"
    r"\s*(?:[:,;—]|-(?!-))?\s*)"
    r"|(?P<note>(?:(?:just |quick )?(?:an? )?(?:fyi|for your information|for future reference|"
    r"for the record|just so you know|so you know|for context|"
    r"make a note(?: that)?|save this for later)\s*(?:[:,;—]|-(?!-))?\s*)"
    r"|(?:(?:just |quick )?(?:an? )?heads[- ]up|important|make a note|pro tip|tip|n\.?b\.?|"
    r"note(?: for (?:the )?(?:future|later|future sessions|next time|everyone))?)"
    r"\s*(?:[:,;—]|-(?!-))\s*)"
    r")",
    re.I,
)
_TRAIL_MARKER = re.compile(
    r"^(?P<body>.+?)[\s,;:—-]+(?:(?:please|so|and)\s+)?(?:"
    r"remember (?:that|this)|keep (?:that|this) in mind|bear (?:that|this) in mind|"
    r"don'?t forget (?:that|this)|do not forget (?:that|this)|note (?:that|this)|"
    r"worth remembering|worth knowing|just so you know|so you know|for future reference|"
    r"for the record|fyi)(?:,?\s*please)?[\s.!]*$",
    re.I,
)
# A sentence that is only a marker points back at the sentence before it.
_BARE_MARKER = re.compile(
    r"^(?:please\s+)?(?:(?:remember|note|don'?t forget|do not forget)\s+(?:that|this|it)"
    r"|(?:keep|bear) (?:that|this|it) in mind|worth remembering|good to know|"
    r"(?:just )?so you know|for future reference|for the record)(?:,?\s*please)?"
    r"(?:\s+(?:for (?:the )?(?:future|later|next time)|going forward))?[\s.!]*$",
    re.I,
)
_CHANGE = re.compile(
    r"^(?:we|the team|our team|everyone)(?:'ve| have| had|'re| are)?\s+"
    r"(?:now |just |recently |finally |already |officially |fully )?"
    r"(?P<verb>moved|switched|migrated|replaced|swapped|dropped|ditched|retired|"
    r"moving|switching|migrating|replacing|standardi[sz](?:ed|ing))\b(?P<rest>.*)$",
    re.I,
)
_CHANGE_TARGET = re.compile(r"\b(?:to|onto|with|for|on|over to|in favou?r of)\b", re.I)
_NO_LONGER = re.compile(r"^(?:we|the team|our \w+)\s+(?:don'?t|do not|no longer)\s+\w+", re.I)
_CONVENTION = re.compile(
    r"^(?:(?:our|the|team|the team'?s?)\s+)?(?:[\w-]+\s+)?"
    r"(?:convention|rule|policy|standard|house style)s?"
    r"(?:\s+(?:here|in (?:this|our|the) (?:" + _PROJECT_NOUNS + r")|for [\w ./-]{2,40}?))?"
    r"\s*(?::|is(?: that| to)?|are)\s+(?P<body>.+)$",
    re.I,
)
_WHEN_RULE = re.compile(
    r"^(?:when|whenever|every time|each time|any ?time|after|before|once) "
    r"(?:you|we|someone|anyone|somebody)\b[^,]{3,80},\s*(?:always |please |just )?"
    r"(?P<verb>[a-z][\w-]*)\b",
    re.I,
)
_PURPOSE_RULE = re.compile(
    r"^to (?P<purpose>[^,`]{3,60}),\s*(?:always |just |please )?(?P<verb>[a-z][\w-]*)\b",
    re.I,
)
_LIKE_SAY = re.compile(
    r"^I (?P<adv>(?:really |strongly |generally |much )*)(?P<verb>like|love|hate|dislike|want)"
    r"\s+(?P<body>.+)$",
    re.I,
)
_DONT_EVER = re.compile(
    r"^(?:please,?\s+)?(?:don'?t|do not)\s+ever\s+(?P<verb>[a-z][\w'-]*)(?P<rest>.*)$", re.I
)
_MODAL = re.compile(r"\b(?:must|should|needs? to|has to|have to|need|needs|required)\b", re.I)
_NOT_IMPERATIVE = word_set(
    "i we you it they he she the a an our my your their there this that these those all every "
    "each no new some be"
)


def _unquote(text: str) -> str:
    """A message wrapped in one pair of quotes (OpenCode's ``run`` stores a multi-word
    argument so) read without them."""
    t = text.strip()
    pairs = {'"': '"', "“": "”", "'": "'"}
    if len(t) > 2 and t[0] in pairs and t.endswith(pairs[t[0]]):
        inner = t[1:-1]
        if t[0] not in inner and pairs[t[0]] not in inner:
            return inner.strip()
    return t


_COMMON_VERBS = (
    _PROCEDURE_VERBS
    | _PREFERENCE_VERBS
    | word_set(
        "write skip tag open create edit delete remove fix look try change move rename mark cut "
        "split wrap return free close send store read ping tell let go do make"
    )
)
_OBJECT_START = word_set("the a an your our my all every each any no it them me us")


def _imperative(body: str) -> bool:
    """Whether ``body`` is in the imperative mood: a known verb first, or a base verb
    followed by its object ("rotate the keys")."""
    head = [w.lower().rstrip(",.;:") for w in body.split()[:2]]
    if not head or head[0] in _NOT_IMPERATIVE:
        return False
    if _IMPERATIVE_START.match(body) or head[0] in _COMMON_VERBS:
        return True
    after = head[1] if len(head) > 1 else ""
    return _is_base_verb(head[0]) and (after in _OBJECT_START or after.startswith("`"))


def _declarative(body: str) -> bool:
    """A subject and a finite verb, roughly: what a statement of fact looks like."""
    return bool(
        re.search(
            r"(?i)\b(?:is|are|was|were|be|been|has|have|had|must|should|can|cannot|can't|will|"
            r"won't|would|does|doesn't|do|don't|isn't|aren't|need|needs|\w+(?<!s)s|\w+ed)\b",
            body,
        )
        or re.match(r"(?i)^(?:we|they|you|everyone|nobody)\s+[a-z]", body)
    )


def _rewrite_first_person(body: str) -> str:
    """ "I like X" -> "User likes X": a memory read later has no "I"."""
    m = _LIKE_SAY.match(body)
    if m:
        verb = m.group("verb").lower()
        verb = {"dislike": "dislikes", "want": "wants"}.get(verb, verb + "s")
        return f"User {m.group('adv').lower()}{verb} {m.group('body')}"
    return _rewrite_first_person_preference(body)


def _standing(body: str, *, moment_ok: bool = False) -> bool:
    """Whether ``body`` states something that holds beyond the moment: not a question,
    hedge, TODO, story, deictic reference or event of the speaker's."""
    if not body or body.rstrip().endswith("?") or _is_question(body) or _TODO.search(body):
        return False
    if _REMINISCE.match(body) or _HEDGE.search(body) or _vague(body):
        return False
    if _DEICTIC.search(body) or _SPEAKER_EVENT.match(body):
        return False
    return moment_ok or not _TRANSIENT.search(body)


def _marked_hit(body: str, kind: str) -> _Hit | None:
    """The memory a marked statement holds: ``kind`` is the marker's (remember, note,
    forward)."""
    body = _FILLER.sub("", _unquote(body).strip())
    body = re.sub(r"(?i)^that\s+(?=\w)", "", body)
    confidence = CONFIDENCE_REMEMBER if kind == "remember" else CONFIDENCE_MARKED
    if not _standing(body):
        return None
    inner = _plain_hit(body)
    if inner:
        return _Hit(
            inner.type,
            inner.content,
            max(inner.confidence, confidence),
            inner.scope,
            inner.replaces,
        )
    if _imperative(body):
        if kind != "forward" and not _OCCASION.search(body):
            return None  # "Important: fix the failing test first" is a task
        hit = _remember_hit(body) if kind == "remember" else None
        if hit:
            return hit
        m = _RULE_SAY.match("always " + body) if not _IMPERATIVE_START.match(body) else None
        verb = (m.group("verb") if m else body.split()[0]).lower()
        kind_ = (
            "procedure"
            if verb in _PROCEDURE_VERBS or verb not in _PREFERENCE_VERBS
            else ("preference")
        )
        content = _finish(body)
        scope: Scope = "global" if kind_ == "preference" else "project"
        return _Hit(kind_, content, confidence, scope) if content else None
    if not _declarative(body):
        return None
    if kind == "remember":
        return _remember_hit(body)
    if _LIKE_SAY.match(body) or _PREFERENCE_SAY.match(body) or re.match(r"(?i)^I \w+", body):
        content = _finish(_rewrite_first_person(body))
        return _Hit("preference", content, confidence, "global") if content else None
    if re.match(r"(?i)^we (?!(?:\w+ed|had|did|were|was)\b)", body) and kind != "forward":
        content = _finish(body)
        return _Hit("procedure", content, confidence, "project") if content else None
    if kind == "forward":
        kind_ = "procedure" if _MODAL.search(body) else "decision"
        content = _finish(body)
        return _Hit(kind_, content, confidence, "project") if content else None
    content = _finish(body)
    return _Hit("fact", content, confidence, "project") if content else None


def _change_hit(s: str) -> _Hit | None:
    """ "We've moved from X to Y": the new state, as a decision."""
    m = _CHANGE.match(s)
    if m:
        if not _CHANGE_TARGET.search(m.group("rest")) or _DEICTIC.search(s) or _HEDGE.search(s):
            return None
    elif not _NO_LONGER.match(s) or _DEICTIC.search(s) or _HEDGE.search(s):
        return None
    content = _finish(s)
    return _Hit("decision", content, CONFIDENCE_DECISION, "project", True) if content else None


def _plain_hit(s: str) -> _Hit | None:
    """Statements whose own shape marks them: changes, conventions, occasion rules, likes
    and "please don't ever"."""
    hit = _change_hit(s)
    if hit:
        return hit
    m = _CONVENTION.match(s)
    if m and not _DEICTIC.search(m.group("body")) and not _vague(m.group("body")):
        content = _finish(s)
        return _Hit("procedure", content, CONFIDENCE_RULE, "project") if content else None
    m = _WHEN_RULE.match(s) or _PURPOSE_RULE.match(s)
    if m and m.group("verb").lower() not in _NOT_IMPERATIVE and _is_base_verb(m.group("verb")):
        purpose = m.groupdict().get("purpose") or ""
        if not _DEICTIC.search(s) and not _ONE_OFF.search(purpose) and not _HEDGE.search(s):
            content = _finish(s)
            return _Hit("procedure", content, CONFIDENCE_HOWTO, "project") if content else None
    m = _DONT_EVER.match(s)
    if m and not _vague(m.group("rest")) and not _DEICTIC.search(s):
        if _TRANSIENT.search(s):
            return None
        verb = m.group("verb").lower().split("-")[-1]
        kind = "procedure" if verb in _PROCEDURE_VERBS or "`" in s else "preference"
        content = _finish(re.sub(r"(?i)^please,?\s+", "", s))
        scope: Scope = "global" if kind == "preference" else "project"
        return _Hit(kind, content, CONFIDENCE_RULE, scope) if content else None
    m = _LIKE_SAY.match(s)
    if (
        m
        and m.group("verb").lower() != "want"
        and not m.group("body").lower().startswith("to ")
        and _standing(m.group("body"))
    ):
        content = _finish(_rewrite_first_person(s))
        return _Hit("preference", content, CONFIDENCE_PREFERENCE, "global") if content else None
    return None


def _sentence_hit(sentence: str) -> _Hit | None:
    """The memory one spoken user sentence states, if it states one on purpose."""
    s = _FILLER.sub("", _unquote(sentence))
    if not s:
        return None
    m = _REMEMBER_SAY.match(s)
    if m:  # "can you remember that X?" is a request, not a question
        if s.endswith("?") and not re.match(r"(?i)^(?:can|could|would|will) you\b", s):
            return None  # "remember when we broke prod?" is a story
        return _remember_hit(m.group("body").rstrip("?").strip())
    if _is_question(s) or _TODO.search(s):
        return None
    m = _LEAD_MARKER.match(s)
    if m and m.end() < len(s):
        kind = next(k for k in ("remember", "forward", "note") if m.group(k))
        return _marked_hit(s[m.end() :], kind)
    m = _TRAIL_MARKER.match(s)
    if m:
        return _marked_hit(m.group("body"), "note")
    hit = _plain_hit(s)
    if hit:
        return hit
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


# The subject of a statement of how things are: "the/our X", "we", "everyone", a name.
_TENTATIVE_SUBJECT = re.compile(
    r"^(?:(?:the|our|all|every|each|both)\s+[\w./-]|(?:we|everyone|nobody)\s|"
    r"[A-Z][\w.+#-]*\s+(?:[\w./+#-]+\s+){0,2}(?:is|are|has|have|runs|uses|needs|lives))"
)
# A present-tense verb of state: what holds beyond the moment.
_STATE_VERB = re.compile(
    r"\b(?:is|are|has|have|must|should|needs?|requires?|runs?|uses?|lives?|sits?|"
    r"depends?|takes?|expects?|accepts?|owns?|stores?|reads?|writes?|goes|go|ships?|"
    r"caches?|listens?|calls?|holds?|keeps?|belongs?|means?|only)\b",
    re.I,
)
# What happened (a report, not a state): past tense outside a passive ("is generated").
_EVENT_VERB = re.compile(
    r"\b(?:was|were|did|had|got|went|broke|ran|made)\b|(?<!\bis )(?<!\bare )(?<!\bbe )"
    r"(?<!\bbeen )(?<![-\w])(?!(?:need|feed|seed|speed|embed|shed)\b)[a-z]{3,}ed\b",
    re.I,
)
_TENTATIVE_MAX_WORDS = 30


def _tentative_hit(sentence: str) -> _Hit | None:
    """A user's unmarked statement of how things are, not sure enough for a memory: a
    subject, a present-tense verb of state, standing (no question, hedge, deixis, moment,
    story, own doings), not an instruction and not a report of what happened."""
    s = _FILLER.sub("", _unquote(sentence)).strip()
    if not s or s.endswith(("?", "!")) or not _TENTATIVE_SUBJECT.match(s):
        return None
    n = len(words(s))
    if n < MIN_WORDS + 1 or n > _TENTATIVE_MAX_WORDS or _imperative(s):
        return None
    if not _standing(s) or not _STATE_VERB.search(s) or _EVENT_VERB.search(s):
        return None
    content = _finish(s)
    return _Hit("fact", content, CONFIDENCE_TENTATIVE, "project") if content else None


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
            yield _BULLET.sub("", _unquote(line)), not previous_blank
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
        previous: str | None = None  # a sentence not yet learned, for a marker after it
        for sentence in split_sentences(line):
            if is_small_talk(sentence):
                previous = None  # "Thanks so much! Remember that." marks nothing
                continue
            # An assistant's own claims are not the user's decisions; its labels are.
            if message.role != "user":
                hit = _label_hit(sentence)
            elif previous and _BARE_MARKER.match(_FILLER.sub("", sentence.strip())):
                hit = _marked_hit(previous, "note")  # "The X runs in UTC. Remember that."
            else:
                hit = _sentence_hit(sentence)
            previous = None if hit else sentence
            if hit is None and message.role == "user":
                hit = _tentative_hit(sentence)  # for the inbox; a marker after may still come
            if hit:
                yield hit


class HeuristicExtractor:
    """Pattern-based extraction: no model, deterministic, and deliberately conservative.

    User messages: "remember that / please remember / don't forget / keep in mind ...",
    discourse markers before or after a statement ("FYI", "for future reference", "going
    forward", "just so you know", "important:", "..., remember that", "... Please
    remember that."), "we decided / agreed ...", "Decision: ...", "let's go with ...",
    changes of state ("we've moved from X to Y": `Candidate.replaces` names X),
    conventions, "I prefer / I'd rather / I like ...", "always / never / don't ever ..."
    rules and how-tos. A message wrapped in quotes (OpenCode's ``run``) is read without
    them. Both roles: ``*Remember*: ...`` notes and ``Decision: ...`` labels. Questions,
    hypotheses, one-off instructions about the code at hand, stories, TODOs, quotes, code,
    tool output, reasoning and small talk (`smalltalk.is_small_talk`) never become
    memories (docs/extraction.md).
    """

    name = "heuristic"

    def extract(
        self, messages: Sequence[Message], *, project: str | None = None
    ) -> list[Candidate]:
        """Candidates in the order they were said (``project`` is for extractors that
        use it, such as a model prompt; the patterns do not need it)."""
        return self.extract_staged(messages, project=project).memories

    def extract_staged(
        self, messages: Sequence[Message], *, project: str | None = None
    ) -> Extraction:
        """`extract`'s candidates and, apart, the unmarked statements for the inbox."""
        raw: list[Candidate] = []
        for message in messages:
            # A pasted key block becomes [REDACTED]; the rest of the message still counts.
            message = replace(message, text=redact_key_blocks(message.text))
            for hit in _message_hits(message):
                if is_small_talk(hit.content):
                    continue  # "Always here to help." matches a rule's shape, says nothing
                raw.append(
                    Candidate(
                        type=hit.type,
                        content=hit.content,
                        confidence=hit.confidence,
                        tags=[],
                        scope=hit.scope,
                        source_message_ids=[message.id],
                        replaces=replaced_term(hit.content) if hit.replaces else None,
                    )
                )
        return split_candidates(finalize_candidates(raw))
