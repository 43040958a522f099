"""The static report's search index: what `web/report_search.js` needs to answer a question
in the page the way the live search's keyword stages do (`search.retriever`), with no
server, no network and no stemmer in the browser.

Per memory: its FTS5 terms with their column-weighted counts and its length (from the
store's own tokenizer, `store.fts_terms`), and the rerank signals the live search adds
(confidence, recency, access, type priority, as of the report), and its project and
session as numbers (the names rule, `Retriever._named_first`), and for a text held more
than once, its first copy's number (each text is shown once, `retriever._distinct`). For
the page: every surface word of the memories (and of the lexicon's synonyms) mapped to
its term, when the two differ; the index-wide BM25 statistics; the stop words and
inflection rules of `text.query`; the synonym table of `text.lexicon`. The page splits a
question into words, drops stop words, maps each word to its term (unknown words: a few
suffixes off, then the close spellings of `text.fuzzy`), and ranks as the live search's
stages: every word, then the memories holding any rarer word by BM25 and by the best
short stretch holding the question's words (`search.retriever.by_evidence`); see
docs/viewer.md.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..search.coherence import SESSION_PENALTY, STRAY_PENALTY, STRAY_SHARE
from ..search.compounds import APART_MAX, APART_RATIO, APART_SHARE
from ..search.matching import WINDOW_CHARS
from ..search.retriever import (
    ALTERNATIVE_SHARE,
    ANSWER_KIND_BOOST,
    AUTHOR_BOOST,
    BM25_SHARE,
    COMMON_WORD_FLOOR,
    COMMON_WORD_SHARE,
    CORRECTION_SHARE,
    DEFAULT_RRF_K,
    EVIDENCE_POOL,
    NAMED_SESSION_PENALTY,
    ROLE_ALIASES,
    SIGNAL_WEIGHTS,
    WHEN_BOOST,
    Retriever,
    distinct_key,
    exchange_key,
    has_time,
    memory_authors,
    rerank_signals,
)
from ..store import fts_terms
from ..text.answer_kinds import TIME_WORDS, says_number, says_time
from ..text.lexicon import ALTERNATIVES
from ..text.query import (
    MAX_NAMES,
    MAX_QUERY_CHARS,
    MAX_QUERY_TERMS,
    NAME_SENTENCE_END,
    QUANTITY_SOURCE,
    STOP_INFLECTIONS,
    STOP_WORDS,
)

if TYPE_CHECKING:
    from ..store import MemoryStore

# What the page splits text into before it looks a word up: letters and digits (as FTS5's
# unicode61 tokenizer), lower case, diacritics removed. report_search.js does the same.
SURFACE = re.compile(r"[^\W_]+")
TEXT_METADATA = ("fts_context", "fts_after")  # metadata the FTS5 index holds words of


def fold(word: str) -> str:
    """Lower case, compatibility forms and diacritics removed (the page: NFKD, no marks)."""
    text = unicodedata.normalize("NFKD", word.lower())
    return "".join(ch for ch in text if not unicodedata.combining(ch))


def surface_words(text: str) -> set[str]:
    return {fold(w) for w in SURFACE.findall(text)} - {""}


def _texts(mem: Mapping[str, Any]) -> Iterable[str]:
    yield str(mem.get("content") or "")
    yield str(mem.get("summary") or "")
    tags = mem.get("tags") or []
    yield " ".join(tags) if isinstance(tags, list) else str(tags)
    meta = mem.get("metadata") or {}
    if isinstance(meta, Mapping):
        for key in TEXT_METADATA:
            if isinstance(meta.get(key), str):
                yield meta[key]


def build(
    store: MemoryStore,
    memories: Sequence[Mapping[str, Any]],
    retriever: Retriever,
    *,
    now: datetime | None = None,
) -> dict[str, Any]:
    """The index of ``memories`` (full memory dicts, as the store returns them), as a
    JSON-able dict (`render_page` embeds it)."""
    now = now or datetime.now(UTC)
    seen: set[str] = set()
    for mem in memories:
        for text in _texts(mem):
            seen |= surface_words(text)
    lexicon = {fold(w) for key, alts in ALTERNATIVES.items() for w in (key, *alts)}
    index = fts_terms.term_index(store.db, [m["id"] for m in memories], seen | lexicon)
    terms = sorted({t for _, tf in index.docs.values() for t in tf})
    number = {t: i for i, t in enumerate(terms)}
    vocab = {
        w: number[t]
        for w, t in sorted(index.word_terms.items())
        if t in number and t != w and w in seen
    }
    alternatives: dict[str, list[Any]] = {}  # word -> [[other word, its term], ...]
    for key, alts in ALTERNATIVES.items():
        found = [[a, number[t]] for a in alts if (t := index.word_terms.get(fold(a))) in number]
        if found:
            alternatives[key] = found
    by_id = {m["id"]: m for m in memories}
    people: dict[str, int] = {}  # authors' names and words, each once

    def person(name: str) -> int:
        return people.setdefault(name, len(people))

    # projects and sessions as numbers: the page only tells them apart (`_named_first`)
    places: dict[tuple[str, str], int] = {}

    def where(mem: Mapping[str, Any]) -> dict[str, int]:
        out = {}
        for field, key in (("project", "p"), ("session_id", "z")):
            if mem.get(field):
                out[key] = places.setdefault((field, str(mem[field])), len(places))
        return out

    # a text said more than once: its copies share the first one's number, and so do the
    # rows of one exchange (a long one's parts and its episode) (`_distinct`)
    same_text = _shared_numbers(
        {mid: distinct_key(str(by_id[mid].get("content", ""))) for mid in index.docs}, "u"
    )
    same_exchange = _shared_numbers({mid: exchange_key(by_id[mid]) for mid in index.docs}, "x")

    docs = []
    for mid, (length, tf) in index.docs.items():  # in the index's order: ties rank as there
        mem = by_id[mid]
        postings: list[Any] = []
        for term, weight in sorted(tf.items(), key=lambda tw: number[tw[0]]):
            w = round(weight, 3)
            postings.append(number[term] if w == 1 else [number[term], w])
        signals = rerank_signals(mem, retriever.type_priority, now)
        content = str(mem.get("content", ""))
        docs.append(
            {
                "id": mem["id"],
                "l": length,
                "t": postings,
                "s": round(sum(SIGNAL_WEIGHTS[k] * v for k, v in signals.items()), 4),
                **({"h": 1} if has_time(mem) else {}),
                **({"ts": 1} if says_time(content) else {}),
                **({"tn": 1} if says_number(content) else {}),
                **_authors(mem, person),
                **where(mem),
                **same_text.get(mid, {}),
                **same_exchange.get(mid, {}),
            }
        )
    return {
        "terms": terms,
        "df": [index.df.get(t, 0) for t in terms],
        "rows": index.rows,
        "floor": index.floor,
        "avgdl": round(index.avgdl, 4),
        "vocab": vocab,
        "alternatives": alternatives,
        "stop_words": sorted(STOP_WORDS),
        "stop_inflections": [list(pair) for pair in STOP_INFLECTIONS],
        "docs": docs,
        "people": list(people),
        "role_aliases": ROLE_ALIASES,
        "settings": {
            "blend": retriever.blend,
            "rrf_k": DEFAULT_RRF_K,
            "fuzzy_threshold": retriever.fuzzy_threshold,
            "max_terms": MAX_QUERY_TERMS,
            "max_chars": MAX_QUERY_CHARS,
            "evidence_pool": EVIDENCE_POOL,
            "bm25_share": BM25_SHARE,
            "window_chars": WINDOW_CHARS,
            "common_share": COMMON_WORD_SHARE,
            "common_floor": COMMON_WORD_FLOOR,
            "alternative_share": ALTERNATIVE_SHARE,
            "apart_ratio": APART_RATIO,
            "apart_share": APART_SHARE,
            "apart_max": APART_MAX,
            "correction_share": CORRECTION_SHARE,
            "author_boost": AUTHOR_BOOST,
            "when_boost": WHEN_BOOST,
            "answer_kind_boost": ANSWER_KIND_BOOST,
            "quantity": QUANTITY_SOURCE,
            "max_names": MAX_NAMES,
            "sentence_end": NAME_SENTENCE_END,
            "time_words": sorted(TIME_WORDS),
            "stray_share": STRAY_SHARE,
            "stray_penalty": STRAY_PENALTY,
            "session_penalty": SESSION_PENALTY,
            "named_session_penalty": NAMED_SESSION_PENALTY,
        },
    }


def _shared_numbers(key_of: Mapping[str, str], field: str) -> dict[str, dict[str, int]]:
    """``{id: {field: n}}`` for the ids whose key (in ``key_of``, in the index's order) is
    held by more than one: ``n`` is the first such id's place. An empty key is no one's."""
    first: dict[str, int] = {}
    ids: dict[str, list[str]] = {}
    for n, (mid, key) in enumerate(key_of.items()):
        if key:
            first.setdefault(key, n)
            ids.setdefault(key, []).append(mid)
    return {mid: {field: first[k]} for k, group in ids.items() if len(group) > 1 for mid in group}


def _authors(mem: Mapping[str, Any], person: Callable[[str], int]) -> dict[str, Any]:
    """Who said a memory, for the live search's author boost and extras (`question_booster`,
    `Retriever._question_extras`): ``e`` its ``entered_by``, ``a`` the words of
    `memory_authors`, ``m`` the words of its metadata's speaker, role, author (as numbers
    into the index's ``people``)."""
    out: dict[str, Any] = {}
    if isinstance(mem.get("entered_by"), str) and mem["entered_by"]:
        out["e"] = person(mem["entered_by"])
    said = sorted(memory_authors(mem))
    if said:
        out["a"] = [person(w) for w in said]
    meta = mem.get("metadata") or {}
    if isinstance(meta, Mapping):
        named = sorted(memory_authors({"metadata": meta}))
        if named:
            out["m"] = [person(w) for w in named]
    return out
