"""The search language: grep-like syntax and natural-language questions, to FTS5.

Syntax (as in the LLMemory spec): words are ANDed (``docker compose``); ``AND``, ``OR``,
``NOT`` (upper case) combine them; ``"exact phrase"``; ``prefix*``; parentheses group.
Everything else is quoted before it reaches FTS5, so no input can produce an FTS5
syntax error except an operator in a place where it makes no sense (``NOT`` first).

A question such as "how do we deploy the staging server?" is the common case: its stop
words are dropped (FTS5 has no stop-word list, and ANDing "how" and "we" would find
nothing), leaving the content words for an AND query and, when that finds too little,
an OR query ranked by BM25.

Quotes inside such a question ("When did Alice read \"Dune Messiah\"?") are a *phrase
boost*, not a filter: a question that holds quoted words and also plain question words
(a stop word such as "when"/"did", or a final "?") and no operators, parentheses or
prefixes is parsed as a question over all its words (relaxation applies), and the quoted
phrases are kept in ``ParsedQuery.phrases`` for the retriever to rank their holders first.
A query of quotes and keywords only (``"tagged release"``, ``docker "compose up"``) stays
grep-like and strict. In a question, words in single or typographic quotes ('wait for the
first sync', ‘…’, “…”) are such a phrase boost too, never syntax: a person quotes a
remark back that way, and an apostrophe ("Marisol's", "don't") opens or closes none.
Parentheses in a sentence with no operator are an aside ("which spots has he surfed (or
planned to)?"), read as words; in a keyword query they group.

Bounds (docs/query-service.md, *Query limits*): a query is at most `MAX_QUERY_CHARS`
characters; a query in search syntax holds at most `MAX_QUERY_TERMS` words, phrases and
prefixes (an OR-chain of thousands of words cost tens of seconds), else ValidationError;
a question keeps its first `MAX_QUERY_TERMS` content words.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..errors import ValidationError
from .answer_kinds import TIME_WORDS
from .lexicon import ALTERNATIVES, alternatives
from .words import words

OPERATORS = frozenset({"AND", "OR", "NOT"})
MAX_QUERY_CHARS = 4_000
MAX_QUERY_TERMS = 32

STOP_WORDS = frozenset(
    """
    a about above after again against all am an and any are aren't as at be because been
    before being below between both but by can can't cannot could couldn't did didn't do
    does doesn't doing don't down during each few for from further had hadn't has hasn't
    have haven't having he her here hers herself him himself his how i i'm if in into is
    isn't it it's its itself just let's me more most my myself no nor not of off on once
    only or other ought our ours ourselves out over own same she should shouldn't so
    some such than that that's the their theirs them themselves then there there's these
    they they're this those through to too under until up very was wasn't we we're were
    weren't what what's when where which while who whom why will with won't would
    wouldn't you you're your yours yourself yourselves again also anything anyone
    something someone thing things way ways get got going know please tell remind
    recall remember say said us hey hi ok okay like really many much
    """.split()  # noqa: SIM905 - a word list reads better as text
)

# Other words for a question's words (synonyms, irregular verbs, kinds): text/lexicon.py.
SYNONYMS: dict[str, list[str]] = ALTERNATIVES

_TOKEN = re.compile(r'"([^"]*)"?|(\()|(\))|([^\s()"]+)')
# A remark quoted back inside a question: 'single', ‘typographic’ or “double” quotes, each
# mark at a word's edge (an apostrophe sits inside or at the end of one).
_SOFT_QUOTE = re.compile(r"(?<![\w'‘’])['‘]([^'‘’\n]{2,120}?)['’](?![\w'’])|“([^”\n]{2,120})”")


# A question a number answers: how many / much / big / long / often, a size, a count, a
# port, a version, a limit, a timeout... (the passages then count a digit as a word of it,
# and the ranking lifts a text that says a number). Not inside a compound: "rate-limiting
# in the proxy" asks for no rate. The static report's search reads the same source
# (viewer/search_index.py), case-insensitive.
QUANTITY_SOURCE = (
    r"\bhow\s+(?:many|much|big|long|large|small|often|fast|far|old|high|low)\b|"
    r"(?<![\w-])(?:size|sizes|number|count|port|version|timeout|ttl|limit|limits|percent|"
    r"percentage|rate|cost|price|duration|interval|threshold|capacity)(?![\w-])"
)
_QUANTITY = re.compile(QUANTITY_SOURCE, re.IGNORECASE)
# "When ..." and its paraphrases: the question asks for a time. Inside a sentence "when"
# asks only before an auxiliary ("... and when was the switch made?"), not as a
# conjunction ("what error appears when the check fails").
_WHEN = re.compile(
    r"(?i)\b(?:what|which)\s+(?:time|date|day|month|year|week)\b|\bhow long ago\b|"
    r"\bwhen\s+(?:exactly\s+)?(?:was|were|did|do|does|is|are|will|would|had|has|have)\b"
)


# A name in a question: a capitalised word inside a sentence ("how many boxes did Sunniva
# have?"), not at its start, not all capitals or mixed case (ORM, FastAPI: software words,
# not someone or somewhere), and not a month or weekday (`answer_kinds.TIME_WORDS`).
_WORD_TOKEN = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")
_POSSESSIVE = re.compile(r"['’]s$")
NAME_SENTENCE_END = ".!?:;"  # a name right after one of these may open a sentence
MAX_NAMES = 4  # a question names a few; a pasted text's every capital is not a lookup


def names_in(text: str) -> list[str]:
    """The names ``text`` says (see `_WORD_TOKEN` above), lower case, once each, in order."""
    found: list[str] = []
    for m in _WORD_TOKEN.finditer(text):
        word = _POSSESSIVE.sub("", m.group())
        if len(word) < 3 or not (word[0].isupper() and word[1:].islower()):
            continue
        i = m.start() - 1
        while i >= 0 and text[i].isspace():  # the character before the word and its spaces
            i -= 1
        if i < 0 or text[i] in NAME_SENTENCE_END or (i == m.start() - 1 and text[i] in "-'’"):
            continue
        name = word.lower()
        if name not in TIME_WORDS and name not in found:
            found.append(name)
            if len(found) == MAX_NAMES:
                break
    return found


def written_as_names(names: Sequence[str], texts: Iterable[str]) -> list[str]:
    """Those of ``names`` (`names_in`, lower case) that ``texts`` write in lower case less
    often than capitalised, and that start none of their identifiers. A question
    capitalises a tool as it does a person ("how long does Redis keep failed jobs?"), while
    the talk about it writes ``redis://`` and ``alembic upgrade``, or names its code after
    it (``RedisClient``, ``Graviton3``, ``Dockerfile``: "Docker" may be capitalised in every
    sentence); a person's or a place's name stays capitalised and names no code (an address
    or a handle, ``ap@halvorsen.no``, does not count). A name the texts do not hold stays."""
    body = "\n".join(texts)
    kept = []
    for name in names:
        lower = _said(body, name, "@")
        title = name.capitalize()
        if (not lower or lower < _said(body, title)) and not _starts_code(body, title):
            kept.append(name)
    return kept


def _starts_code(body: str, word: str) -> bool:
    """Whether ``word`` starts an identifier of ``body``: a capital or a digit right after
    it (``RedisClient``, ``Graviton3``) or ``file`` (``Dockerfile``), not after a letter,
    digit, ``_`` or ``@``, nor an address's (``Fenna2000@``). `str.find` first, as `_said`."""
    i, end = body.find(word), len(word)
    while i >= 0:
        before = body[i - 1] if i else " "
        rest = body[i + end : i + end + 5]
        after = rest[:1].isupper() or rest[:1].isnumeric()
        after |= rest[:4] == "file" and not (rest[4:5].isalnum() or rest[4:5] == "_")
        if after and not (before.isalnum() or before in "_@"):
            j = i + end
            while j < len(body) and (body[j].isalnum() or body[j] in "_.-"):
                j += 1
            if body[j : j + 1] != "@":
                return True
        i = body.find(word, i + 1)
    return False


def _said(body: str, word: str, not_after: str = "") -> int:
    """How often ``body`` holds ``word`` as a whole word (not right after a character of
    ``not_after``). `str.find` first: a regex that opens with a look-behind tries every
    position: 1.6 ms on a search's 32 kB of candidates, against 0.02."""
    n, i, end = 0, body.find(word), len(word)
    while i >= 0:
        before = body[i - 1] if i else " "
        after = body[i + end] if i + end < len(body) else " "
        if not (before.isalnum() or before == "_" or before in not_after) and not (
            after.isalnum() or after == "_"
        ):
            n += 1
        i = body.find(word, i + 1)
    return n


def quote(term: str) -> str:
    """Quote ``term`` as an FTS5 string (a phrase if it has several tokens)."""
    return '"' + term.replace('"', '""') + '"'


@dataclass
class ParsedQuery:
    """A query analysed once, for the several strategies of the retriever.

    ``strict_match``: the FTS5 expression with grep semantics (implicit AND);
    ``terms``: the content words (stop words removed) for OR relaxation and fuzzy matching;
    ``explicit``: the user wrote operators, quotes or prefixes, so we do not relax it.
    """

    raw: str
    strict_match: str = ""
    terms: list[str] = field(default_factory=list)
    explicit: bool = False
    alternatives: dict[str, list[str]] = field(default_factory=dict)
    phrases: list[str] = field(default_factory=list)
    asks_when: bool = False
    asks_quantity: bool = False  # "how many", "what size", "which port": a number answers
    names: list[str] = field(default_factory=list)  # `names_in`; none for search syntax
    # a hyphenated word's parts, which count as it when one memory holds them all
    # (`search.compounds`), in `any_of` only
    apart: dict[str, list[str]] = field(default_factory=dict)

    def group(self, term: str, extra: Sequence[str] = ()) -> str:
        """``term`` as FTS5, widened to its synonyms (and ``extra`` spellings) if any."""
        alts = [term, *self.alternatives.get(term, ()), *extra]
        alts = list(dict.fromkeys(alts))
        if len(alts) == 1:
            return quote(term)
        return "(" + " OR ".join(quote(a) for a in alts) + ")"

    def all_of(self, terms: Sequence[str]) -> str:
        return " AND ".join(self.group(t) for t in terms)

    def any_of(self, terms: Sequence[str], extra: Mapping[str, Sequence[str]] | None = None) -> str:
        extra = extra or {}
        return " OR ".join(self._widened(t, extra.get(t, ())) for t in terms)

    def _widened(self, term: str, extra: Sequence[str]) -> str:
        """`group`, or'ed with all of ``term``'s `apart` parts."""
        parts = self.apart.get(term)
        if not parts:
            return self.group(term, extra)
        return f"({self.group(term, extra)} OR ({' AND '.join(quote(p) for p in parts)}))"

    def at_least(self, m: int) -> str:
        """Memories containing at least ``m`` of the content words ("minimum should match").

        An OR of the AND of every m-subset: far fewer rows than a plain OR, so BM25 ranks
        a small set, and the rows it finds share more of the question's words.
        """
        if len(self.terms) == 4 and m == 3:
            # The same rows with each word written twice instead of three times: FTS5's BM25
            # reads a word's whole row list once per occurrence (~40% of this stage's time
            # on everyday words), and as every word occurs equally often the order of the
            # rows is the same.
            a, b, c, d = (self.group(t) for t in self.terms)
            return f"({a} AND {b} AND ({c} OR {d})) OR (({a} OR {b}) AND {c} AND {d})"
        subsets = itertools.combinations(self.terms, m)
        return " OR ".join(f"({self.all_of(sub)})" for sub in subsets)


def is_stop_word(word: str) -> bool:
    """A stop word, or an inflection of one of three letters or more ("getting",
    "says", "knows", "liked"): "I keep getting this error" asks about the error, and an
    inflected filler word no memory holds would otherwise be read as a typo and searched
    as its close spellings ("getting" -> "setting", in one memory of ten)."""
    if word in STOP_WORDS:
        return True
    for cut, add in STOP_INFLECTIONS:
        if len(word) > len(cut) + 2 and word.endswith(cut):
            base = word[: -len(cut)] + add
            if len(base) >= 3 and base in STOP_WORDS:
                return True
            doubled = cut in ("ing", "ed") and len(base) >= 4 and base[-1] == base[-2]
            if doubled and base[:-1] in STOP_WORDS:  # getting -> gett -> get
                return True
    return False


# Suffixes an inflection adds, and what the plain form then ends with.
STOP_INFLECTIONS = (
    ("ing", ""),
    ("ing", "e"),
    ("ies", "y"),
    ("es", ""),
    ("s", ""),
    ("ed", ""),
    ("d", ""),
)


def content_words(text: str) -> list[str]:
    """Words minus stop words; all words if nothing else is left (e.g. "what is it")."""
    ws = list(dict.fromkeys(words(text)))
    # Single letters are left from contractions ("what's" -> what, s) or are noise.
    kept = [w for w in ws if not is_stop_word(w) and (len(w) > 1 or w.isdigit())]
    return kept or ws


def parse_query(query: str) -> ParsedQuery:
    """Turn user input into FTS5 expressions (see the module docstring). Raises
    ValidationError for a query over the bounds of the module docstring."""
    if len(query or "") > MAX_QUERY_CHARS:
        raise ValidationError(
            f"invalid search query: longer than {MAX_QUERY_CHARS} characters"
            f" ({len(query)}); search for a few distinctive words"
        )
    parsed = ParsedQuery(raw=query)
    tokens: list[str] = []  # FTS5 pieces
    plain: list[str] = []  # free text, for the content words
    phrases: list[str] = []
    other_syntax = False  # operators or parentheses: never a question
    parens = False  # syntax in a keyword query; prose in a sentence without operators
    globbed = False  # a prefix (word*): syntax in a keyword query, a glob in a sentence
    question_words = False  # an unquoted stop word: the query reads as a sentence
    depth = 0
    for m in _TOKEN.finditer(query or ""):
        phrase, lpar, rpar, bare = m.groups()
        if phrase is not None:
            if phrase.strip():
                tokens.append(quote(phrase.strip()))
                plain.append(phrase)
                phrases.append(" ".join(words(phrase)))
                parsed.explicit = True
        elif lpar:
            tokens.append("(")
            depth += 1
            parens = True
        elif rpar:
            if depth > 0:
                tokens.append(")")
                depth -= 1
        elif bare in OPERATORS:
            tokens.append(bare)
            parsed.explicit = True
            other_syntax = True
        elif bare.endswith("*") and len(bare.rstrip("*")) > 0:
            stem = " ".join(words(bare.rstrip("*")))
            if stem:
                tokens.append(quote(stem) + "*")
                plain.append(stem)
                parsed.explicit = True
                globbed = True
        else:
            ws = words(bare)
            if ws:
                question_words = question_words or any(w in STOP_WORDS for w in ws)
                tokens.append(("__WORD__", " ".join(ws)))  # type: ignore[arg-type]
                plain.append(" ".join(ws))
    tokens.extend(")" * depth)
    parsed.terms = content_words(" ".join(plain))[:MAX_QUERY_TERMS]
    first = words(query or "")[:1]
    parsed.asks_when = bool(first and first[0] == "when") or bool(_WHEN.search(query or ""))
    parsed.asks_quantity = bool(_QUANTITY.search(query or ""))
    sentence = question_words or (query or "").rstrip().endswith("?")
    if parens and (other_syntax or not sentence):
        parsed.explicit = other_syntax = True
    elif parens:  # "which spots has he surfed (or planned to)?": an aside, not a group
        tokens = [t for t in tokens if t not in ("(", ")")]
    if sentence and not other_syntax:
        for m in _SOFT_QUOTE.finditer(query or ""):
            phrases.append(" ".join(words(m.group(1) or m.group(2))))
    parsed.phrases = [p for p in dict.fromkeys(phrases) if p]
    if (phrases or globbed) and not other_syntax and sentence:
        # quotes in a question: a boost (the retriever), not a filter; a star in one is
        # a glob the person typed ("one QUEUE_BACKEND_* variable per task"), not a prefix
        parsed.explicit = False
    parsed.names = [] if parsed.explicit else names_in(query or "")
    # Implicit-AND words: drop stop words unless the user wrote operators around them.
    keep_stop = parsed.explicit and any(t in OPERATORS for t in tokens if isinstance(t, str))
    out: list[str] = []
    for tok in tokens:
        if isinstance(tok, tuple):
            text = tok[1]
            if (
                not keep_stop
                and all(w in STOP_WORDS for w in text.split())
                and parsed.terms
                and text not in parsed.terms
            ):
                continue
            out.append(quote(text))
        else:
            out.append(tok)
    parsed.alternatives = {t: alts for t in parsed.terms if (alts := alternatives(t))}
    if parsed.explicit:
        pieces = sum(1 for t in out if t not in OPERATORS and t not in ("(", ")"))
        if pieces > MAX_QUERY_TERMS:
            raise ValidationError(
                f"invalid search query: {pieces} words or phrases; at most {MAX_QUERY_TERMS}"
                " in search syntax"
            )
        parsed.strict_match = _tidy(out)
    else:  # a question or plain words: AND of the content words, each with its synonyms
        parsed.strict_match = parsed.all_of(parsed.terms)
    return parsed


def _tidy(tokens: list[str]) -> str:
    """Drop dangling AND/OR (``docker AND``) so FTS5 accepts the query; a NOT with nothing
    before it cannot be expressed in FTS5 and is an error rather than silently dropped.
    FTS5 reads two phrases side by side as AND but not a phrase beside a group
    (``docker (compose OR swarm)`` is its syntax error): the AND is written out there."""
    cleaned: list[str] = []
    for tok in tokens:
        after_operand = bool(cleaned) and cleaned[-1] not in OPERATORS and cleaned[-1] != "("
        if (
            after_operand
            and tok not in OPERATORS
            and tok != ")"
            and (tok == "(" or cleaned[-1] == ")")
        ):
            cleaned.append("AND")
        if tok in OPERATORS and (not cleaned or cleaned[-1] in OPERATORS or cleaned[-1] == "("):
            if tok == "NOT":
                raise ValidationError(
                    "invalid search query: NOT needs a term before it (e.g. 'docker NOT swarm')"
                )
            continue
        if tok == ")":
            while cleaned and cleaned[-1] in OPERATORS:
                cleaned.pop()
            if cleaned and cleaned[-1] == "(":
                cleaned.pop()
                continue
        cleaned.append(tok)
    while cleaned and cleaned[-1] in OPERATORS:
        cleaned.pop()
    return " ".join(cleaned)
