"""The plain keyword floor every retrieval bench reports beside ours (issue 23).

The simplest search anyone could build over the same conversations, computed in the same
run: one row per exchange (a user message and the replies after it, whole), in a plain
SQLite FTS5 table (default tokenizer, no stemming, no synonyms), ranked by bm25 over an OR
of the question's non-stop words. Nothing of llmem-hooks is used, so a change to our
retriever can never move the floor. A bench whose result falls below the floor at @5 or
@10 on any set has a regression, whatever else it gains.

    floor = KeywordFloor()
    floor.add("s1#3", "User: ...\\nAssistant: ...")
    floor.search("which port does the ledger db use?", k=10)  # -> [("s1#3", text), ...]
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Sequence

# Common English function words (a question's "which", "did", "we" say nothing about where
# its answer is). Written for this floor; deliberately short and generic.
_STOP_TEXT = """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just me more most my myself no nor not now of off on once only or
    other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your
    yours yourself yourselves s t don doesn didn isn aren wasn weren won shouldn couldn
    wouldn ll ve re d m o y ever also
"""
STOP_WORDS = frozenset(_STOP_TEXT.split())
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def floor_terms(question: str) -> list[str]:
    """The question's non-stop words, lower-cased, in order, once each."""
    seen: list[str] = []
    for w in _WORD.findall(question.lower()):
        if w not in STOP_WORDS and w not in seen:
            seen.append(w)
    return seen


class KeywordFloor:
    """An in-memory FTS5 table of exchanges, searched by bm25 over an OR of words."""

    def __init__(self) -> None:
        self.conn = sqlite3.connect(":memory:")
        self.conn.execute("CREATE VIRTUAL TABLE ex USING fts5(key UNINDEXED, grp UNINDEXED, body)")

    def add(self, key: str, text: str, group: str = "") -> None:
        """One row; ``group`` (a project) lets a search keep to some groups."""
        self.conn.execute("INSERT INTO ex (key, grp, body) VALUES (?, ?, ?)", (key, group, text))

    def add_all(self, rows: Iterable[tuple[str, str]]) -> None:
        self.conn.executemany("INSERT INTO ex (key, body) VALUES (?, ?)", list(rows))

    def search(
        self, question: str, k: int = 10, groups: Sequence[str] | None = None
    ) -> list[tuple[str, str]]:
        """The ``k`` best (key, text) for ``question`` (within ``groups``, when given); []
        when it has no content word."""
        terms = floor_terms(question)
        if not terms:
            return []
        match = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
        where, args = "", [match]
        if groups is not None:
            where = f" AND grp IN ({', '.join('?' * len(groups))})"
            args += list(groups)
        return [
            (str(key), str(body))
            for key, body in self.conn.execute(
                f"SELECT key, body FROM ex WHERE ex MATCH ?{where} ORDER BY bm25(ex) LIMIT ?",
                (*args, k),
            )
        ]

    def close(self) -> None:
        self.conn.close()


def exchanges(turns: Sequence[tuple[str, str, str]]) -> list[tuple[list[str], str]]:
    """(turn ids, text) per exchange of one session's ``turns`` (id, role, text): a user
    message with the assistant messages after it; replies before any user message form
    an exchange of their own."""
    out: list[tuple[list[str], list[str]]] = []
    for tid, role, text in turns:
        if role == "user" or not out:
            out.append(([tid], [text]))
        else:
            out[-1][0].append(tid)
            out[-1][1].append(text)
    return [(ids, "\n".join(texts)) for ids, texts in out]


def at_k(ranks: Sequence[int | None], k: int) -> float:
    """The share of a question's evidence found in the top ``k`` (ranks from 1; None = not
    found)."""
    return sum(1 for r in ranks if r is not None and r <= k) / len(ranks) if ranks else 0.0
