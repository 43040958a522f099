"""Retriever: finding the memories that answer a query.

Pipeline (FTS mode): parse the query (`llmem_hooks.text.query`) -> strict AND match ranked by
BM25 -> if that finds fewer than wanted, the OR of the content words, ranked by BM25 ->
if still fewer than 5, fuzzy corrections of unknown words (`llmem_hooks.text.fuzzy`) ->
reciprocal-rank fusion with semantic results when an embedder is given -> rerank by
confidence, recency, access frequency and type priority -> for plain questions, the
question boosts (`question_booster`: a quoted phrase the hit holds, an author the question
names, a time for "when" questions).

Rerank (LLMem reference): ``final = rrf * (1 - blend) + signals * blend`` with signals
``0.4 confidence + 0.3 recency + 0.2 access + 0.1 type priority``. Raw RRF scores are
tiny (1/61 at best) while signals are near 1, so both are scaled to [0, 1] first (RRF
divided by its best possible value, type priority by the highest priority); otherwise
the signals alone would decide the order and relevance would be lost.

Results: `Retriever.find` returns `SearchHit`s (the memory, untouched, plus its scores and
how it matched); which memories may match is one `MemoryFilter`.
"""

from __future__ import annotations

import itertools
import logging
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, cast

from ..config import RetrievalSettings
from ..errors import NotFoundError, SearchError, SearchTimeout, ValidationError
from ..store import Memory, MemoryFilter, MemoryStore, pack_embedding
from ..store.db import is_interrupted
from ..text import fuzzy
from ..text.answer_kinds import says_number, says_time
from ..text.comparisons import event_clauses
from ..text.query import ParsedQuery, parse_query, quote, words, written_as_names
from .coherence import demote_strays
from .compounds import widen_compounds
from .doc_counts import DocCounts
from .matching import evidence_scorer, memory_text
from .passages import fit

if TYPE_CHECKING:
    from ..model.embed import Embedder

log = logging.getLogger(__name__)

# Chosen by measurement with a real small embedding model (bench/minilm_sweep.py,
# docs/retrieval.md): alpha 0.3 with the semantic list's RRF k = 10 lifts MRR on both dev
# sets and never scores below FTS-only on recall@5, recall@10 or MRR.
DEFAULT_ALPHA: float = RetrievalSettings.alpha  # the setting's default (config.py)
DEFAULT_BLEND: float = RetrievalSettings.blend
DEFAULT_LIMIT: int = RetrievalSettings.limit
DEFAULT_RRF_K = 10
# The semantic list's RRF k when it is fused with FTS hits (the same 10 as keyword ranks;
# the customary 60 flattens the model's order until it hardly matters).
DEFAULT_RRF_K_SEMANTIC: int = RetrievalSettings.rrf_k_semantic
# Known words are widened to their close spellings only when nothing matched them: after a
# hit, "paging" for "staging" adds noise, not answers (a typo is corrected regardless).
FUZZY_MIN_RESULTS = 1
# A question comparing two events in time (`text.comparisons`): each event's best hit is
# kept within the first EVENT_RANK results, right after the first.
EVENT_RANK = 5
SEARCH_TIME_LIMIT_S = 2.0  # a search's SQL is stopped after this (`Retriever._bounded`)
# Within one project a name's sessions come first by this much score, not all of them
# before all others: a project's sessions continue one another ("the Docker image" of one
# session is answered by the next, which says only "node:22"), while separate projects
# are separate worlds (there the named ones come first outright). Tuned on the chats of
# the conversational sets in one project and the fresh technical conversations alone.
NAMED_SESSION_PENALTY = 0.3
# A plain question's candidates ranked by evidence (`Retriever._ranked`), and the share of
# their order that BM25 decides (the rest: the best stretch of text holding the question's
# words, `search.matching.evidence_scorer`). Chosen on the dev sets (bench/ablation.py,
# docs/benchmarks.md).
EVIDENCE_POOL = 20
BM25_SHARE = 0.6
COMMON_WORD_SHARE = 0.02
COMMON_WORD_FLOOR = 500
# A word form or synonym (`lexicon`) in more than this share of the memories is not
# searched for ("keeps" is widened to "kept" only while "kept" says something).
ALTERNATIVE_SHARE = 0.2
# A guessed spelling in more than this share is no correction: "outdated" is not
# "updated" when every other row says "updated" (a typo of a common word, "dokcer", still
# finds "docker" in a fifth of the rows).
CORRECTION_SHARE = 0.4
SIGNAL_WEIGHTS = {"confidence": 0.4, "recency": 0.3, "access": 0.2, "type": 0.1}
DEFAULT_TYPE_PRIORITY: dict[str, float] = {
    "decision": 1.2,
    "preference": 1.1,
    "procedure": 1.1,
    "fact": 1.0,
    "project_state": 1.0,
    "self_assessment": 1.0,
    "event": 0.9,
    "conversation": 0.8,
}
SEARCH_MODES = ("hybrid", "fts", "semantic")

Match = Literal["fts", "fuzzy", "semantic"]
PASSAGE_HITS = 5  # the results that share the passage budget (what a reader takes in)
PASSAGE_TAIL_CHARS = 200  # what each later result shows at most


@dataclass(slots=True)
class SearchHit:
    """One search result: the memory as stored, and what the search learned about it.

    Kept apart from the memory (as simonw/llm's ``Entry``) so a memory dict never carries
    scoring keys. ``score`` is the final reranked score (higher is better), ``rrf`` the
    fused rank score before reranking, ``bm25`` FTS5's rank (lower is better; None for a
    semantic-only hit), ``distance`` the cosine distance (None for a keyword-only hit),
    ``corrections`` the fuzzy spellings that found it (word -> alternatives), ``passage``
    the query-focused excerpt shown in place of a long content (None: shown whole).
    """

    memory: Memory
    match: Match
    score: float = 0.0
    rrf: float = 0.0
    bm25: float | None = None
    distance: float | None = None
    corrections: dict[str, list[str]] | None = None
    passage: str | None = None  # what to show when the content is cut (`attach_passages`)

    @property
    def id(self) -> str:
        return self.memory["id"]


def attach_passages(hits: Sequence[SearchHit], query: str, budget: int) -> None:
    """Give each hit whose content is too long to show whole the lines that answer
    ``query`` (`passages.fit`); ranking is untouched. The first `PASSAGE_HITS` hits share
    ``budget`` characters; each later one shows at most `PASSAGE_TAIL_CHARS`. ``budget``
    <= 0 shows every content whole."""
    if budget <= 0 or not hits:
        return
    parsed = parse_query(query)
    terms = [*parsed.terms, *(a for t in parsed.terms for a in parsed.alternatives.get(t, ()))]
    contents = [h.memory["content"] for h in hits]
    numbers = parsed.asks_quantity
    shown = fit(contents[:PASSAGE_HITS], terms, budget, numbers)
    shown += [fit([c], terms, PASSAGE_TAIL_CHARS, numbers)[0] for c in contents[PASSAGE_HITS:]]
    for hit, text in zip(hits, shown, strict=True):
        hit.passage = None if text == hit.memory["content"] else text


def _hit(row: dict[str, Any], match: Match) -> SearchHit:
    """A store result as a hit: the store's ``_bm25`` / ``_distance`` move onto the hit."""
    bm25 = row.pop("_bm25", None)
    distance = row.pop("_distance", None)
    return SearchHit(cast(Memory, row), match, bm25=bm25, distance=distance)


def _rrf_score(rank: int, k: int = DEFAULT_RRF_K) -> float:
    """Reciprocal-rank-fusion contribution of a 1-based rank."""
    return 1.0 / (k + rank)


def _days_since(ts: str | None, now: datetime) -> float | None:
    if not ts:
        return None
    try:
        then = datetime.fromisoformat(ts)
    except ValueError:
        return None
    return max(0.0, (now - then).total_seconds() / 86400.0)


def rerank_signals(
    mem: Mapping[str, Any], type_priority: Mapping[str, float], now: datetime
) -> dict[str, float]:
    """The four reference signals, each in [0, 1]."""
    since_access = _days_since(mem.get("accessed_at"), now)
    age = _days_since(mem.get("created_at"), now) or 0.0
    count = mem.get("access_count") or 0
    top = max(type_priority.values()) if type_priority else 1.0
    return {
        "confidence": float(mem.get("confidence") or 0.0),
        "recency": math.exp(-0.01 * since_access) if since_access is not None else 0.0,
        "access": min(1.0, math.log1p(count / max(age, 1.0))) if count else 0.0,
        "type": type_priority.get(mem.get("type", ""), 1.0) / top,
    }


class Retriever:
    """Search over a `MemoryStore`: FTS5 (+ fuzzy), optional semantic, fused and reranked."""

    def __init__(
        self,
        store: MemoryStore,
        embedder: Embedder | None = None,
        alpha: float = DEFAULT_ALPHA,
        blend: float = DEFAULT_BLEND,
        *,
        rrf_k: int = DEFAULT_RRF_K,
        rrf_k_semantic: int = DEFAULT_RRF_K_SEMANTIC,
        fuzzy_threshold: float = fuzzy.DEFAULT_THRESHOLD,
        type_priority: Mapping[str, float] | None = None,
        clock: Callable[[], datetime] | None = None,
        time_limit: float | None = SEARCH_TIME_LIMIT_S,
    ) -> None:
        for name, value in (
            ("alpha", alpha),
            ("blend", blend),
            ("fuzzy_threshold", fuzzy_threshold),
        ):
            if not 0.0 <= value <= 1.0:
                raise ValidationError(f"{name} must be between 0 and 1, got {value!r}")
        self.store = store
        self.embedder = embedder
        self.alpha = alpha
        self.blend = blend
        self.rrf_k = rrf_k
        self.rrf_k_semantic = rrf_k_semantic
        self.fuzzy_threshold = fuzzy_threshold
        self.type_priority = dict(type_priority or DEFAULT_TYPE_PRIORITY)
        self._clock = clock or (lambda: datetime.now(UTC))
        self.time_limit = time_limit
        self.counts = DocCounts()
        self.alternative_share = ALTERNATIVE_SHARE

    @classmethod
    def from_settings(
        cls,
        store: MemoryStore,
        settings: RetrievalSettings | Mapping[str, Any],
        embedder: Embedder | None = None,
    ) -> Retriever:
        """A retriever with the ``retrieval:`` section's weights (config.yaml)."""
        r = settings if isinstance(settings, RetrievalSettings) else RetrievalSettings(**settings)
        return cls(
            store,
            embedder=embedder,
            alpha=r.alpha,
            blend=r.blend,
            fuzzy_threshold=r.fuzzy_threshold,
            rrf_k_semantic=r.rrf_k_semantic,
        )

    # -- public API --------------------------------------------------------------------------
    def find(
        self,
        query: str,
        filter: MemoryFilter | None = None,
        *,
        limit: int = DEFAULT_LIMIT,
        offset: int = 0,
        alpha: float | None = None,
        search_mode: str = "hybrid",
        track_access: bool = True,
        fuzzy: bool | None = None,
        threshold: float | None = None,
    ) -> list[SearchHit]:
        """Up to ``limit`` hits for ``query`` among the memories ``filter`` allows, best first.

        ``search_mode``: "hybrid" (FTS + semantic fused by RRF; FTS only, with a warning,
        when there is no embedder), "fts", or "semantic" (needs an embedder).
        ``fuzzy``: None = only when exact matching finds fewer than 5; True/False = always/never.
        """
        if search_mode not in SEARCH_MODES:
            raise ValidationError(
                f"invalid search mode {search_mode!r} (use {', '.join(SEARCH_MODES)})"
            )
        if limit < 1 or offset < 0:
            raise ValidationError("limit must be >= 1 and offset >= 0")
        if not query or not query.strip():
            return []
        alpha = self.alpha if alpha is None else alpha
        if search_mode == "semantic" and self.embedder is None:
            raise SearchError("semantic search needs an embedder; none is configured")
        if search_mode == "hybrid" and self.embedder is None:
            log.warning("hybrid search without an embedder: using FTS only")
            search_mode = "fts"
        flt = filter if filter is not None else MemoryFilter()
        want = limit + offset
        pool = max(2 * want, 20)
        parsed = parse_query(query)
        if parsed.names:
            pool *= 2  # `_named_first` reorders it: what a named project holds lower down
        fts_hits: list[SearchHit] = []
        sem_hits: list[SearchHit] = []
        events: list[SearchHit] = []
        spelling = self.fuzzy_threshold if threshold is None else threshold
        with self._bounded():
            authors = self._authors_named(parsed)
            if search_mode in ("fts", "hybrid"):
                fts_hits = self._fts(parsed, flt, pool, fuzzy, spelling)
                fts_hits = self._question_extras(parsed, authors, flt, pool, fts_hits)
                events = [] if parsed.explicit else self._event_tops(query, flt, spelling)
            if search_mode in ("semantic", "hybrid"):
                sem_hits = self._semantic(query, flt, pool)
        if search_mode == "fts":
            alpha = 0.0
        elif search_mode == "semantic":
            alpha = 1.0
        boost = question_booster(parsed, authors)
        fused = self._fuse(fts_hits, sem_hits, alpha, boost)
        if not parsed.explicit and len(parsed.terms) > 1:
            fused = demote_strays(fused, parsed, lambda: self._rarity(parsed))
        if parsed.names:
            with self._bounded():
                fused = self._named_first(parsed, flt, fused)
        results = _distinct(_events_near_top(fused, events), want)[offset:]
        if track_access and results:
            self.store.touch_batch([h.id for h in results])
        return results

    def find_hybrid_or_keywords(
        self, query: str, filter: MemoryFilter | None = None, **kwargs: Any
    ) -> tuple[list[SearchHit], str]:
        """(hits, mode): hybrid when the embedder answers for ``query`` (its vector is then
        cached, so the search does not ask again), else keywords ("fts"); a model that
        fails mid-search also falls back to keywords. The one place that choice is made
        (the query service, the viewer and ``llmem-hooks search`` use it). ``kwargs`` are
        `find`'s; bad input and a search timeout are raised, never retried."""
        mode = "fts"
        if self.embedder is not None:
            try:
                self.embedder.embed(query)
                mode = "hybrid"
            except Exception as exc:  # down, backed off, wrong size: keywords this time
                log.debug("search without embeddings: %s", exc)
        try:
            return self.find(query, filter, search_mode=mode, **kwargs), mode
        except (ValidationError, NotFoundError, SearchTimeout):
            raise
        except Exception as exc:
            if mode == "fts":
                raise
            log.info("semantic search failed, keywords only: %s", exc)
            return self.find(query, filter, search_mode="fts", **kwargs), "fts"

    @contextmanager
    def _bounded(self) -> Iterator[None]:
        """The search's statements under `time_limit` seconds (SQLite's progress handler,
        `MemoryStore.time_limit`); one cut off is a `SearchTimeout`, not a 40 s wait."""
        try:
            with self.store.time_limit(self.time_limit):
                yield
        except Exception as exc:
            if not is_interrupted(exc):
                raise
            raise SearchTimeout(
                f"the search took longer than {self.time_limit:g} s and was stopped;"
                " search for fewer or rarer words"
            ) from None

    # -- strategies --------------------------------------------------------------------------
    def _fts(
        self,
        parsed: ParsedQuery,
        flt: MemoryFilter,
        pool: int,
        use_fuzzy: bool | None,
        threshold: float,
    ) -> list[SearchHit]:
        if not parsed.strict_match:
            return []
        if not parsed.explicit and self._drop_common_alternatives(parsed):
            parsed.strict_match = parsed.all_of(parsed.terms)
        if not parsed.explicit:
            count = partial(self.counts.count, self.store)
            widen_compounds(parsed, count, self.store.size_hint())
        corrected: dict[str, list[str]] = {}
        if use_fuzzy is not False and not parsed.explicit:
            # A word no memory contains is most likely a typo ("dokcer"): widen it to its
            # close spellings up front, so the other words cannot bury it under hits that
            # merely share them (the "fewer than 5 results" cascade below would never run).
            corrected = self._corrections(parsed.terms, threshold)
            for term, alts in corrected.items():
                parsed.alternatives[term] = [*parsed.alternatives.get(term, ()), *alts]
            if corrected:
                parsed.strict_match = parsed.all_of(parsed.terms)
        if parsed.explicit:
            try:
                rows = self.store.fts_search(parsed.strict_match, flt, pool)
            except Exception as exc:  # an FTS5 syntax error from an odd operator combination
                if "fts5" in str(exc).lower() or "syntax" in str(exc).lower():
                    raise ValidationError(f"invalid search query {parsed.raw!r}: {exc}") from None
                raise
            return [_hit(r, "fts") for r in rows]
        hits = self._ranked(parsed, flt, pool)
        seen = {h.id for h in hits}
        if corrected:
            for h in hits:
                h.match, h.corrections = "fuzzy", corrected
        if use_fuzzy is False:
            return hits
        if use_fuzzy is None and len(hits) >= FUZZY_MIN_RESULTS:
            return hits
        # Still too little (or --fuzzy): widen the known words too ("dockers" is a word,
        # but the memories say "docker").
        corrections = self._corrections(parsed.terms, threshold, known_too=True)
        if corrections:
            for row in self.store.fts_search(
                parsed.any_of(parsed.terms, corrections), _excluding(flt, seen), pool
            ):
                hit = _hit(row, "fuzzy")
                hit.corrections = corrections
                hits.append(hit)
        return hits

    def _rarity(self, parsed: ParsedQuery) -> list[float]:
        """Each question word's inverse document frequency, from the (cached) counts the
        ranked stage takes (a common word counted up to its cap): its evidence weights
        and the coherence rule's."""
        cap = self._cap(COMMON_WORD_SHARE)
        size = max(self.store.size_hint(), 1)
        df = [self.counts.count(self.store, parsed.group(t), cap) for t in parsed.terms]
        return [math.log(1.0 + size / d) if d else 0.0 for d in df]

    def _cap(self, share: float) -> int:
        return int(max(COMMON_WORD_FLOOR, share * self.store.size_hint()))

    def _newest_only(
        self, flt: MemoryFilter, parsed: ParsedQuery, terms: Sequence[str], m: int = 0
    ) -> MemoryFilter:
        """``flt`` without its `MemoryFilter.rank_newest` when a stage cannot match that
        many rows: finding the newest N rows runs the stage's whole expression once more
        (2-5 ms on everyday words), for nothing when there are fewer. The bound, from
        each word's (cached) count: an AND of the words matches at most the rarest word's
        rows; "at least ``m`` of them", at most their sum over ``m``."""
        newest = flt.rank_newest
        if not newest or not terms:
            return flt
        df = [self.counts.count(self.store, parsed.group(t), newest) for t in terms]
        m = m or len(terms)
        bound = min(df) if m >= len(terms) else sum(df) // m
        return replace(flt, rank_newest=None) if bound < newest else flt

    def _drop_common_alternatives(self, parsed: ParsedQuery) -> bool:
        """Leave out the other forms and synonyms of a question's words that are in more
        than `alternative_share` of the memories (never fewer than `COMMON_WORD_FLOOR`):
        they say little, and each costs FTS5 a ranking of every memory that holds it
        ("keeps" -> "kept" in two rows of three). True when one was dropped."""
        cap = self._cap(self.alternative_share)
        dropped = False
        for term, alts in list(parsed.alternatives.items()):
            kept = [a for a in alts if self.counts.count(self.store, quote(a), cap) <= cap]
            if len(kept) < len(alts):
                dropped = True
                parsed.alternatives[term] = kept
        return dropped

    def _authors_named(self, parsed: ParsedQuery) -> set[str]:
        """The question's words that name a stored author (``entered_by``: a person, a
        role such as "reviewer", an agent): one indexed lookup per word, no scan."""
        if parsed.explicit:
            return set()
        names = [t for t in parsed.terms if len(t) > 2 and not t.isdigit()]
        names += [ROLE_ALIASES[t] for t in names if t in ROLE_ALIASES]
        return {t for t in names if self.store.has_author([t, t.capitalize(), t.upper()])}

    def _named_first(
        self, parsed: ParsedQuery, flt: MemoryFilter, hits: list[SearchHit]
    ) -> list[SearchHit]:
        """``hits`` with those of the projects that say a name the question says first
        (each group in its order): "how many boxes did Sunniva have?" is about the
        project where Sunniva is, not the four others where someone moved flat. Within one
        project, the sessions that say it lead by `NAMED_SESSION_PENALTY`. A hit that says
        the name itself stays among the first too (a global memory about her). A hit moved
        down is scored as the one above it at most. Names the candidates write in lower
        case as often (a tool's: `written_as_names`) are no names. No change when no hit's
        project (session) says the name or every one does: one FTS5 lookup per project and
        name."""
        if not parsed.names or len(hits) < 2:
            return hits
        column = "project"
        keys = {str(h.memory.get(column)) for h in hits if h.memory.get(column)}
        if flt.project or len(keys) < 2:
            column = "session_id"
            keys = {str(h.memory.get(column)) for h in hits if h.memory.get(column)}
            if len(keys) < 2:
                return hits
        texts = [str(h.memory.get("content", "")) for h in hits]
        names = written_as_names(parsed.names, texts)
        said = [re.compile(rf"(?<!\w){re.escape(n)}(?!\w)", re.IGNORECASE) for n in names]
        says = [[bool(p.search(text)) for p in said] for text in texts]
        named: set[str] = set()
        for k, name in enumerate(names):
            # a candidate that says it answers for its project; the store for the others
            found = {str(h.memory.get(column)) for h, s in zip(hits, says, strict=True) if s[k]}
            found &= keys
            if keys - found:
                found |= self.store.saying(name, keys - found, by=column)
            if found != keys:
                named |= found
        if not named:
            return hits
        first: list[SearchHit] = []
        rest: list[SearchHit] = []
        for h, s in zip(hits, says, strict=True):
            (first if h.memory.get(column) in named or any(s) else rest).append(h)
        if column == "session_id":  # one thread: the others lose ground, not their place
            for h in rest:
                h.score -= NAMED_SESSION_PENALTY
            return sorted(first + rest, key=lambda h: -h.score)
        out = first + rest
        for above, h in itertools.pairwise(out):  # scores read best first too
            h.score = min(h.score, above.score)
        return out

    def _question_extras(
        self,
        parsed: ParsedQuery,
        authors: set[str],
        flt: MemoryFilter,
        pool: int,
        hits: list[SearchHit],
    ) -> list[SearchHit]:
        """Candidates a plain question may miss: memories holding a quoted phrase (the
        boost in `question_booster` then ranks them first), and the named author's own
        statements about the question's other words (their text rarely names them)."""
        if parsed.explicit:
            return hits
        seen = {h.id for h in hits}
        extra: list[SearchHit] = []
        if parsed.phrases:
            match = " OR ".join(quote(p) for p in parsed.phrases)
            for row in self.store.fts_search(match, _excluding(flt, seen), pool):
                extra.append(_hit(row, "fts"))
                seen.add(row["id"])
        rest = [t for t in parsed.terms if t not in authors]
        for name in sorted(authors):
            if not rest:
                break
            for variant in (name, name.capitalize(), name.upper()):
                by = replace(_excluding(flt, seen), entered_by=variant)
                for row in self.store.fts_search(parsed.any_of(rest), by, pool // 2):
                    extra.append(_hit(row, "fts"))
                    seen.add(row["id"])
        return hits + extra

    def _event_tops(self, query: str, flt: MemoryFilter, threshold: float) -> list[SearchHit]:
        """The best keyword hit of each event a comparison question names ("which came
        first: A or B?"), searched on its own (`text.comparisons`); none for other questions."""
        clauses = event_clauses(query)
        if clauses is None:
            return []
        tops: list[SearchHit] = []
        for clause in clauses:
            try:  # a clause is part of a plain question; read alone it may be odd syntax
                hits = self._fts(parse_query(clause), flt, EVENT_RANK, None, threshold)
            except ValidationError:
                continue
            if hits:
                tops.append(hits[0])
        return tops

    def _ranked(self, parsed: ParsedQuery, flt: MemoryFilter, pool: int) -> list[SearchHit]:
        """A plain question's hits: the memories holding every word (an AND is as short as
        its rarest word's rows) and, unless those fill the pool, those holding any of its
        rarer words, each the best `EVIDENCE_POOL` by BM25; then all of them ordered by
        BM25 and by the best stretch of text holding the question's words (`by_evidence`);
        the first ``pool``.

        Words found in more than COMMON_WORD_SHARE of all memories are not searched for
        alone (alone they say little, and ranking every memory that holds one costs tens of
        milliseconds at 100k memories) but count in the AND and in the evidence, at their
        low weight. A question of common words only: every word, then the rarest alone.
        """
        cap = self._cap(COMMON_WORD_SHARE)
        df = {t: self.counts.count(self.store, parsed.group(t), cap) for t in parsed.terms}
        rare = [t for t in parsed.terms if 0 < df[t] <= cap]
        want = max(pool, EVIDENCE_POOL)
        rows: list[dict[str, Any]] = []
        if len(parsed.terms) > 1 or not rare:
            every = self._newest_only(flt, parsed, parsed.terms)
            rows = self.store.fts_search(parsed.all_of(parsed.terms), every, want)
        if not rare:
            top = self.store.size_hint()
            exact = {t: self.counts.count(self.store, parsed.group(t), top) for t in parsed.terms}
            rare = sorted((t for t in parsed.terms if exact[t] > 0), key=lambda t: exact[t])[:1]
        if rare and len(rows) < want:  # enough hold every word: the rest would rank below
            rest = _excluding(flt, {r["id"] for r in rows})
            stage = self._newest_only(rest, parsed, rare, 1)
            rows += self.store.fts_search(parsed.any_of(rare), stage, want)
        hits = [_hit(r, "fts") for r in rows]
        if len(parsed.terms) < 2:  # one word: every hit holds it, BM25 says the rest
            return hits[:pool]
        # The evidence weighs the rarer words within its stretch, the common ones wherever
        # the text holds them (in a long reply they match every few words).
        idf = self._rarity(parsed)  # the same counts, cached
        near = [x if t in rare else 0.0 for t, x in zip(parsed.terms, idf, strict=True)]
        far = [0.0 if t in rare else x for t, x in zip(parsed.terms, idf, strict=True)]
        return by_evidence(hits, parsed, near, far)[:pool]

    def _corrections(
        self, terms: Sequence[str], threshold: float, known_too: bool = False
    ) -> dict[str, list[str]]:
        """Close spellings from the vocabulary for each word no memory contains, where the
        word reads as a typo of them (`fuzzy.looks_like_typo`); with ``known_too`` (the
        search found too little) every close spelling of every word."""
        out: dict[str, list[str]] = {}
        for term in terms:
            if fuzzy.extract_terms(term) != {term}:
                continue
            if not known_too and self.counts.count(self.store, quote(term), 0) > 0:
                continue  # a word some memory holds (cached: recall asks on every prompt)
            cap = self._cap(CORRECTION_SHARE)
            alts = [
                a
                for a in self.counts.suggestions(self.store, term, threshold)
                if (known_too or fuzzy.looks_like_typo(term, a))
                and self.counts.count(self.store, quote(a), cap) <= cap
            ]  # a common word is no correction worth its cost ("outdated" -> "updated")
            if alts:
                out[term] = alts
        return out

    def _semantic(self, query: str, flt: MemoryFilter, pool: int) -> list[SearchHit]:
        assert self.embedder is not None
        qblob = pack_embedding(list(self.embedder.embed(query)))
        assert qblob is not None
        return [_hit(row, "semantic") for row in self.store.nearest(qblob, flt, pool)]

    def _fuse(
        self,
        fts_hits: list[SearchHit],
        sem_hits: list[SearchHit],
        alpha: float,
        boost: Callable[[Mapping[str, Any]], float] | None = None,
    ) -> list[SearchHit]:
        k = self.rrf_k
        # A lone list keeps sharp ranks; next to FTS hits the semantic ranks are flattened.
        k_sem = self.rrf_k_semantic if fts_hits and alpha < 1.0 else k
        merged: dict[str, SearchHit] = {}
        for weight, hits, list_k in ((1.0 - alpha, fts_hits, k), (alpha, sem_hits, k_sem)):
            for rank, hit in enumerate(hits, start=1):
                kept = merged.setdefault(hit.id, hit)
                if kept is not hit and kept.distance is None:  # found by both: keep both
                    kept.distance = hit.distance
                kept.rrf += weight * _rrf_score(rank, list_k)
        best = max(
            (1.0 - alpha) / (k + 1) if fts_hits else 0.0,
            alpha / (k_sem + 1) if sem_hits else 0.0,
        )
        now = self._clock()
        for hit in merged.values():
            signals = rerank_signals(hit.memory, self.type_priority, now)
            weighted = sum(SIGNAL_WEIGHTS[s] * v for s, v in signals.items())
            norm = hit.rrf / best if best else 0.0
            hit.score = norm * (1.0 - self.blend) + weighted * self.blend
            if boost is not None:
                hit.score += boost(hit.memory)
        return sorted(merged.values(), key=lambda h: h.score, reverse=True)


def distinct_key(content: str) -> str:
    """What makes two texts the same to a reader: their words, case and spacing aside."""
    return " ".join(content.lower().split())


def exchange_key(mem: Mapping[str, Any]) -> str:
    """An episode's exchange (its session and first message), "" for other memories."""
    ids = mem.get("source_message_ids") or []
    return f"\0{mem.get('session_id')}\0{ids[0]}" if ids and mem.get("source") == "episode" else ""


def _distinct(hits: list[SearchHit], want: int) -> list[SearchHit]:
    """The first ``want`` hits, each text and each exchange (a long one's parts and its
    episode, `session.episodes.middle_parts`) once, where it ranks best. A heuristic
    session summary recurs in every short session, and three drew into a top five
    (DevMemBench): a copy tells nothing new and takes a place. 40 long episodes: 0.6 ms."""
    seen: set[str] = set()
    out: list[SearchHit] = []
    for hit in hits:
        if len(out) >= want:
            break
        key = distinct_key(str(hit.memory.get("content", "")))
        exchange = exchange_key(hit.memory) or key
        if key not in seen and exchange not in seen:
            seen.update((key, exchange))
            out.append(hit)
    return out


def _events_near_top(results: list[SearchHit], events: Sequence[SearchHit]) -> list[SearchHit]:
    """``results`` with each event's best hit (`Retriever._event_tops`) within the first
    `EVENT_RANK`: one ranked lower (or not at all) moves to just after the first result,
    the second event after the first, scored as the hit it follows."""
    out = list(results)
    for i, event in enumerate(events):
        rank = next((k for k, h in enumerate(out) if h.id == event.id), None)
        if rank is not None and rank < EVENT_RANK:
            continue
        found = event if rank is None else out.pop(rank)
        at = min(1 + i, len(out))
        if at:
            found.score = out[at - 1].score
        out.insert(at, found)
    # an event left in place may have been pushed down by a later one: back to the last place
    for event in events:
        rank = next((k for k, h in enumerate(out) if h.id == event.id), None)
        if rank is not None and rank >= EVENT_RANK:
            found = out.pop(rank)
            found.score = out[EVENT_RANK - 2].score
            out.insert(EVENT_RANK - 1, found)
    return out


# What a question says beyond its words, added to the final score (which lives in [0, 1]:
# the top keyword hit has 0.7 from RRF; rank 5 has 0.51). A phrase the question quotes
# outweighs a few ranks; a named author, or a time for a "when" question, about three.
PHRASE_BOOST = 0.3
AUTHOR_BOOST = 0.2
WHEN_BOOST = 0.2
# A result that says what the question asks for: a time for "when", a number for "how
# many" (`text.answer_kinds`). Measured (issue 23, 2026-11-28, in process): long chats dev
# @5 / @10 0.776 / 0.850 -> 0.790 / 0.852, held out 0.789 / 0.861 -> 0.789 / 0.865; the
# harder chats dev 0.565 / 0.690 -> 0.615 / 0.707, held out @5 0.608 -> 0.592 (one
# question); DevMemBench and techconv's held-out half unchanged (a number or a date is in
# nearly every technical exchange), its dev half @10 0.875 -> 0.871.
ANSWER_KIND_BOOST = 0.1
AUTHOR_METADATA_KEYS = ("speaker", "role", "author", "user", "name")
TIME_METADATA_KEYS = ("time", "date", "occurred_at", "said_at", "started_at", "when")
TIMED_TYPES = frozenset({"conversation", "event"})
# How a question names the person at the keyboard, and the author value that means them
# (`llmem-hooks store` enters "user"; episodes' speaker is "user").
ROLE_ALIASES = {"developer": "user", "programmer": "user", "human": "user"}
_DATE = re.compile(
    r"\b(?:\d{4}-\d{2}-\d{2}|(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"
    r"\s+\d{1,2}\b|\d{1,2}\s+(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*|"
    r"yesterday|last (?:week|month|year)|\d{1,2}:\d{2})",
    re.IGNORECASE,
)


def by_evidence(
    hits: Sequence[SearchHit],
    parsed: ParsedQuery,
    weights: Sequence[float],
    anywhere: Sequence[float] = (),
) -> list[SearchHit]:
    """``hits`` (BM25 order) ordered by ``BM25_SHARE`` x their BM25 relative to the best
    plus the rest x the weighed share of the question's words that their best stretch of
    `WINDOW_CHARS` holds (``anywhere``: words counted wherever the text holds them). A
    long exchange whose every paragraph shares a word with the question no longer outranks
    the one that answers it in one place."""
    if len(hits) < 2:
        return list(hits)
    evidence = evidence_scorer(parsed, weights, anywhere=anywhere)
    best = max(-(h.bm25 or 0.0) for h in hits) or 1.0

    def score(hit: SearchHit) -> float:
        held = evidence(memory_text(hit.memory))
        return BM25_SHARE * -(hit.bm25 or 0.0) / best + (1.0 - BM25_SHARE) * held

    return sorted(hits, key=score, reverse=True)


def memory_authors(mem: Mapping[str, Any]) -> set[str]:
    """Who said a memory, as lower-case words: ``entered_by`` and the metadata's speaker,
    role, author (strings or lists of them)."""
    values: list[Any] = [mem.get("entered_by")]
    meta = mem.get("metadata") or {}
    if isinstance(meta, Mapping):
        values.extend(meta.get(k) for k in AUTHOR_METADATA_KEYS)
    out: set[str] = set()
    for v in values:
        for item in v if isinstance(v, list) else [v]:
            if isinstance(item, str):
                out.update(words(item))
    return out


def has_time(mem: Mapping[str, Any]) -> bool:
    """An episode or event, or a memory that records when something happened (a time in
    its metadata or a date in its text)."""
    if mem.get("type") in TIMED_TYPES:
        return True
    meta = mem.get("metadata") or {}
    if isinstance(meta, Mapping) and any(meta.get(k) for k in TIME_METADATA_KEYS):
        return True
    return bool(_DATE.search(str(mem.get("content", ""))))


def question_booster(
    parsed: ParsedQuery, authors: set[str] | None = None
) -> Callable[[Mapping[str, Any]], float] | None:
    """The score a hit gains from what the question says besides its words: quoted
    phrases it holds, an author the question names (``authors``: question words that are
    stored authors; the metadata's speaker/role count too), a time for "when" questions,
    and a text that says a time or a number when the question asks for one.
    None when the question says nothing of the kind (the common case, no cost)."""
    if parsed.explicit:
        return None
    phrases = [p for p in parsed.phrases if p]
    authors = authors or set()
    names = {t for t in parsed.terms if len(t) > 2 and not t.isdigit()}
    names |= {ROLE_ALIASES[t] for t in names if t in ROLE_ALIASES}
    when = parsed.asks_when
    quantity = parsed.asks_quantity
    padded = [f" {p} " for p in phrases]

    def boost(mem: Mapping[str, Any]) -> float:
        score = 0.0
        if padded:
            text = " " + " ".join(words(f"{mem.get('content', '')} {mem.get('summary') or ''}"))
            text += " "
            score += PHRASE_BOOST * sum(1 for p in padded if p in text) / len(padded)
        if (authors and memory_authors(mem) & authors) or _named_in_metadata(mem, names):
            score += AUTHOR_BOOST
        if when and has_time(mem):
            score += WHEN_BOOST
        if when or quantity:
            content = str(mem.get("content", ""))
            if (when and says_time(content)) or (quantity and says_number(content)):
                score += ANSWER_KIND_BOOST
        return score

    return boost


def _named_in_metadata(mem: Mapping[str, Any], names: set[str]) -> bool:
    """Whether the speaker/role metadata (not only ``entered_by``, whose common values
    such as "user" are no name a question means) holds one of ``names``."""
    meta = mem.get("metadata") or {}
    if not isinstance(meta, Mapping):
        return False
    for key in AUTHOR_METADATA_KEYS:
        v = meta.get(key)
        for item in v if isinstance(v, list) else [v]:
            if isinstance(item, str) and names & set(words(item)):
                return True
    return False


def _excluding(flt: MemoryFilter, ids: set[str]) -> MemoryFilter:
    """``flt`` also excluding ``ids`` (the ids it excluded already stay excluded)."""
    return replace(flt, exclude_ids=tuple(dict.fromkeys([*flt.exclude_ids, *ids])))
