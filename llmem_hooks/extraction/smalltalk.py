"""Small talk and substance: what a conversation says that is worth keeping.

Small talk is a sentence whose whole job is social: a greeting, thanks, an
acknowledgement, an offer of help, a compliment to the other speaker, a well-wish, a
phatic question ("how are you?"). Such a sentence is never a memory, whatever pattern it
happens to match ("Always here to help." reads like an always-rule). Each rule below names
a shape of that phenomenon, not a sentence: the shape, then only stopwords, intensifiers,
names of the other speaker and punctuation.

Substance is what makes an exchange (or a session) worth an episode or a summary: a tool
call, an identifier (file path, command, version, port, URL, error code, a name), an error,
a durable statement the heuristics would keep, or enough content words outside small talk.
Decided by content, never by length alone (docs/episodes.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .candidates import word_set, words
from .transcript import split_sentences

# Words that carry nothing once a social phrase is taken away.
_FILLERS = (
    r"(?:so|very|really|truly|too|as well|also|always|just|again|all|much|lot|a lot|"
    r"indeed|definitely|absolutely|totally|super|such|quite|pretty|ever|still|though|"
    r"anytime|any time|today|tonight|now|here|there|then|too|both|man|mate|buddy|friend|"
    r"folks|everyone|everybody|guys|team|all|y'all|dear|ok(?:ay)?|oh|ah|wow|yeah|yes|yep|"
    r"sure|well|hey|hi|and|but|you|me|us|it|that|this|for|to|of|on|the|a|an|with|from|"
    r"(?:a |my )?pleasure|"
    r"(?-i:[A-Z][a-z]+))"
)
_TAIL = rf"(?:[\s,;:!.~…—-]*{_FILLERS}\b)*[\s,;:!.?~…—\-)(*:;<>3DPp^_o0-]*$"
_EVALUATIVE = (
    r"(?:great|good|nice|amazing|awesome|brilliant|wonderful|fantastic|excellent|perfect|"
    r"the best|the greatest|a star|a legend|a lifesaver|a life saver|a gem|a genius|"
    r"a champ|kind|sweet|lovely|helpful|smart|clever|cool|incredible|outstanding|"
    r"welcome|right|correct|worth it|worth every \w+|appreciated|fine|okay|ok|"
    r"doing (?:great|well|fine|good)|on fire|killing it|a pleasure)"
)
_SHAPES = (
    # greetings and farewells: "hello there", "hey Tomas!", "good morning all", "bye"
    r"(?:hi|hello|hey|hiya|howdy|yo|greetings|good (?:morning|afternoon|evening|night|day)|"
    r"morning|evening|bye|goodbye|good ?bye|see (?:you|ya)(?: later| soon| tomorrow)?|"
    r"take care|talk (?:to you )?(?:soon|later)|later|cheers|welcome back)",
    # thanks and acknowledgements: "thanks a lot!", "got it", "sounds good", "no worries"
    r"(?:(?:many |great )?thanks?(?: you)?(?: so much| a lot| a ton| again| for (?:the|your) "
    r"(?:help|time|answer|reply|explanation|patience|support))*|thx|ty|much appreciated|"
    r"(?:i |we )?(?:really |truly )?appreciate (?:it|that|this|you|your help|the help)|"
    r"got it|gotcha|understood|noted|makes sense|sounds (?:good|great|fine|perfect)|"
    r"no (?:problem|worries|prob)|not a problem|of course|my pleasure|any ?time|"
    r"(?:you'?re|you are) (?:very |so |most )?welcome|ok(?:ay)?|sure(?: thing)?|alright|"
    r"all right|cool|great|perfect|nice|awesome|lovely|wonderful|excellent|brilliant|"
    r"fair enough|will do|done|yes|yeah|yep|no|nope|right|indeed|exactly|agreed|lol|haha)",
    # offers of help: "always here to help", "happy to help anytime", "let me know if ..."
    r"(?:(?:i'?m|i am|we'?re|we are|i'?ll be|always|as always|i'?m always)\s+)?(?:always\s+)?"
    r"(?:here|happy|glad|ready|available|around|pleased)\s+(?:to|if you(?:'d like| want| need)"
    r"(?: me)?(?: to)?)\s+(?:help|assist|chat|talk|support you|be of help)",
    r"(?:(?:just |please |do )?(?:let me know|feel free to (?:ask|reach out|ping me|"
    r"let me know)|don'?t hesitate to (?:ask|reach out)|just (?:ask|holler|shout)|"
    r"ping me)(?: if| whenever| when| anytime| any time)?(?: you)?"
    r"(?: need| have| want| would like| think of)?(?: anything| any)?(?: else| more| other)?"
    r"(?: help| questions?| help with (?:anything|that|this))?(?: comes? up)?)",
    r"(?:(?:is there )?anything else(?: i can (?:help|do)(?: you)?(?: with)?)?|"
    r"(?:i )?hope (?:this|that|it) helps|glad (?:i could|to|it) (?:help(?:ed)?|work(?:ed|s)))",
    # compliments to the other speaker: "you're worth it too", "you are amazing", "great job"
    rf"(?:and )?(?:you'?re|you are|you were|ur|u r|you've been|you have been|that'?s|"
    rf"that is|this is|what an?)\s+(?:{_FILLERS}\s+)*{_EVALUATIVE}"
    r"(?:\s+(?:of you|to (?:hear|know|say)|question|idea|job|work|answer|help|friend|"
    r"person|one|as always))*",
    r"(?:(?:great|good|nice|awesome|amazing|excellent|fantastic) "
    r"(?:job|work|effort|stuff|going|one|call|question|point)|well done|way to go|"
    r"kudos|bravo|congrats|congratulations|proud of you|love (?:you|it|that|this))",
    # well-wishes: "have a great weekend", "good luck!", "enjoy your day"
    r"(?:(?:i )?hope you (?:have|had|enjoy|are|'re) (?:a |an )?\w+(?: \w+)?|"
    r"have (?:a |an )?(?:great|good|nice|lovely|wonderful|fun|safe)?\s*\w+|"
    r"good luck(?: with (?:it|that|everything))?|best of luck|enjoy(?: it| your \w+)?|"
    r"stay safe|be well|sleep well|get some rest)",
    # phatic questions: "how are you?", "what's up", "how was your weekend?"
    r"(?:how (?:are|r) (?:you|u)(?: doing)?|how'?s it going|how (?:have|'ve) you been|"
    r"what'?s up|sup|how was your \w+|how is your \w+ going|you (?:ok|okay|there|good)|"
    r"are you (?:there|ok|okay|around)|can you hear me|test(?:ing)?|"
    r"(?:how|what) (?:can|may|could) i (?:help|assist|do)(?: you)?(?: with)?(?: for you)?)",
)
_SMALL_TALK = re.compile(
    rf"^[\s*_>\-]*(?:{'|'.join(_SHAPES)})(?:[\s,;:!.?~…—-]+(?:{'|'.join(_SHAPES)}))*{_TAIL}",
    re.I,
)

# -- substance ------------------------------------------------------------------------------

_IDENTIFIER = re.compile(
    r"`[^`\n]+`"  # code or a command
    r"|\bhttps?://\S+|\bwww\.\S+"  # URL
    r"|(?:^|[\s(\"'])(?:~|\.{1,2})?/[\w.-]+"  # absolute or relative path
    r"|\b[\w.-]+/[\w./-]+"  # a/b paths, owner/repo
    r"|\b[\w-]+\.(?:py|js|ts|tsx|jsx|json|ya?ml|toml|md|txt|sh|go|rs|java|rb|c|h|cpp|cs|"
    r"sql|db|ini|cfg|conf|lock|env|html|css|xml|csv|log)\b"  # a file name
    r"|\bv?\d+\.\d+(?:\.\d+)*\b"  # a version
    r"|(?:\bport\s+|:)\d{2,5}\b"  # a port
    r"|\b[A-Z]{1,5}-?\d{2,}\b|\b[45]\d\d\b"  # an error code, an HTTP status
    r"|\b[a-z]+_[a-z0-9_]+\b"  # snake_case
    r"|\b[a-z]+[A-Z]\w*\b|\b[A-Z][a-z0-9]+[A-Z]\w*\b"  # camelCase, CamelCase
    r"|\b[A-Z]{2,}\b"  # an acronym: API, CI, SQL
    r"|(?:^|\s)--?[a-z][\w-]*"  # a command-line option
)
# A capitalized word inside a sentence: a name (of a person, a service, a product).
_NAME = re.compile(r"(?<=[\w,;)] )(?!I\b|I'[a-z]+\b)[A-Z][\w.+#-]+")
_ERROR = re.compile(
    r"(?i)\b(?:errors?|exceptions?|traceback|fail|failed|failures?|fails|crash(?:ed|es)?|"
    r"panic|segfault|bug|broken|timeout|timed out|refused|denied)\b"
)
_SPEAKER = re.compile(r"^(?:User|Assistant):\s*")
_TOOL_LINE = re.compile(r"^\[[^\]\n]+\]")
_STOPWORDS = word_set(
    "the and for are but not you all any can her was one our out has have his how its may "
    "new now old see two way who did get let put say she too use that this with from they "
    "will what when your which their there than them then these those into just also is "
    "i me my we us it a an to of in on at by or so do be if as am no yes ok okay oh well "
    "about would could should there here what's it's i'm you're that's don't can't "
    "really very much some more like know think want need sure thing things something "
    "anything everything maybe please"
)
# Content words (outside small talk) an exchange without any other sign of substance
# needs: "what is 2 + 2?" / "4." is a throwaway; "He is better than me. Humiliating." is not
MIN_CONTENT_WORDS = 5
# A social phrase is short: a longer sentence is read as content (and the patterns, whose
# fillers repeat, stay cheap on a pasted wall of text).
SMALL_TALK_MAX_CHARS = 300


def is_small_talk(sentence: str) -> bool:
    """Whether ``sentence`` only greets, thanks, acknowledges, offers help, compliments
    or wishes well (nothing a later session could use)."""
    s = " ".join(sentence.split())
    if not s or len(s) > SMALL_TALK_MAX_CHARS or _IDENTIFIER.search(s):
        return False
    return bool(_SMALL_TALK.match(s))


def _sentences(lines: Iterable[str]) -> list[str]:
    return [s for line in lines for s in split_sentences(_SPEAKER.sub("", line.strip()))]


def content_words(text: str) -> list[str]:
    """The words of ``text`` that carry meaning: not stopwords, not one letter."""
    return [w for w in words(text) if len(w) > 1 and w.lower() not in _STOPWORDS]


def has_substance(text: str, *, statements: int = 0) -> bool:
    """Whether an exchange's text (``User: ...`` / ``Assistant: ...`` lines, tool calls
    as ``[tool] ...``) holds anything worth keeping. ``statements`` is how many durable
    statements (decisions, rules, facts) extraction found in it."""
    if statements:
        return True
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if any(_TOOL_LINE.match(_SPEAKER.sub("", ln.strip())) for ln in lines):
        return True  # a command was run or a file touched
    said = [s for s in _sentences(lines) if not is_small_talk(s)]
    for s in said:
        if _IDENTIFIER.search(s) or _NAME.search(s) or _ERROR.search(s):
            return True
    return sum(len(content_words(s)) for s in said) >= MIN_CONTENT_WORDS
