"""A question asked across projects is answered from the project that holds it, not from
one that shares a word or two with it by chance (`search/coherence.py`)."""

from __future__ import annotations

from pathlib import Path

from llmem_hooks import MemoryStore, Retriever
from llmem_hooks.store import MemoryFilter

QUESTION = "Where does each generated document end up in object storage?"


def _store(st: MemoryStore) -> dict[str, str]:
    ids = {
        "key": st.add(
            "fact",
            "Each generated invoice PDF ends up in the bucket under"
            " invoices/{customer}/{year}/{number}.pdf",
            project="billing",
        ),
        "minio": st.add(
            "fact", "Object storage is MinIO locally and S3 in production", project="billing"
        ),
        # "document" three times and "object": the best BM25 of all, and nothing else
        "dom": st.add(
            "fact",
            "The editor keeps each document in the document object model, document by document",
            project="webapp",
        ),
    }
    for n in range(6):
        st.add("fact", f"The worker retries the render job {n} times", project="billing")
        st.add("fact", f"The webapp build takes {n} minutes on CI", project="webapp")
    return ids


def test_a_project_holding_little_of_the_question_goes_below_the_one_holding_it(
    tmp_path: Path,
) -> None:
    with MemoryStore(tmp_path / "m.db") as st:
        ids = _store(st)
        hits = Retriever(st).find(QUESTION, limit=5, search_mode="fts", track_access=False)
        order = [h.id for h in hits]
        assert order[:2] == [ids["minio"], ids["key"]]
        assert order.index(ids["dom"]) == 2  # still found, below the project that holds it
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_one_project_or_search_syntax_is_left_as_ranked(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "m.db") as st:
        ids = _store(st)
        r = Retriever(st)
        within = r.find(QUESTION, MemoryFilter(project="webapp"), limit=5, search_mode="fts")
        assert within[0].id == ids["dom"]
        syntax = r.find("document OR storage", limit=5, search_mode="fts", track_access=False)
        assert syntax[0].id == ids["dom"]


def test_in_one_project_a_session_holding_little_of_it_goes_below(tmp_path: Path) -> None:
    """One repository's sessions are threads on many topics: the same rule over sessions,
    at half the penalty."""
    with MemoryStore(tmp_path / "m.db") as st:
        key = st.add(
            "fact",
            "Each generated invoice PDF ends up in the bucket under invoices/{customer}/",
            project="repo",
            session_id="s-billing",
        )
        minio = st.add(
            "fact",
            "Object storage is MinIO locally and S3 in production",
            project="repo",
            session_id="s-billing",
        )
        dom = st.add(
            "fact",
            "The editor keeps each document in the document object model, document by document",
            project="repo",
            session_id="s-editor",
        )
        for n in range(6):
            st.add("fact", f"The render job retries {n} times", project="repo", session_id=f"f{n}")
        question = "Where does each generated invoice document end up in object storage?"
        r = Retriever(st)
        order = [h.id for h in r.find(question, limit=5, search_mode="fts", track_access=False)]
        assert order[:3] == [key, minio, dom]  # the editor's session was second
