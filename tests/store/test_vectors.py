"""The sqlite-vec index: kept in sync with memories, repaired after writes without the
extension, exact below the prefilter threshold and prefiltered above, FTS-only without it."""

from __future__ import annotations

import math
import random
import struct
from pathlib import Path
from typing import Any

import pytest
from support.fake_ollama import embed_text

from llmem_hooks import MemoryStore, Retriever
from llmem_hooks.errors import ValidationError
from llmem_hooks.store import OWN_SCAN_MAX, MemoryFilter, pack_embedding
from llmem_hooks.store.vectors import BIT_TABLE, VEC_TABLE, vector_status

DIM = 64


def emb(text: str, dim: int = DIM) -> list[float]:
    return embed_text(text, dim)


def seq_of(store: MemoryStore, mid: str) -> int:
    return store.conn.execute("SELECT seq FROM memories WHERE id = ?", (mid,)).fetchone()[0]


def tables(store: MemoryStore) -> set[str]:
    return {r[0] for r in store.conn.execute("SELECT name FROM sqlite_master")}


def assert_in_sync(store: MemoryStore) -> dict[int, bytes]:
    """Both vec tables hold exactly the memories with an embedding of the store's size,
    with the same vectors; returns {seq: vector}."""
    dims = store.vectors.dimensions
    assert dims is not None
    want = {
        r[0]: bytes(r[1])
        for r in store.conn.execute(
            "SELECT seq, embedding FROM memories WHERE embedding IS NOT NULL "
            "AND length(embedding) = ?",
            (4 * dims,),
        )
    }
    got = {
        r[0]: bytes(r[1]) for r in store.conn.execute(f"SELECT rowid, embedding FROM {VEC_TABLE}")
    }
    assert got == want
    bits = {r[0] for r in store.conn.execute(f"SELECT rowid FROM {BIT_TABLE}")}
    assert bits == set(want)
    return got


def test_no_vec_tables_until_the_first_vector(store: MemoryStore) -> None:
    store.add("fact", "no embedding here")
    assert not tables(store) & {VEC_TABLE, BIT_TABLE, "_vec_meta"}  # FTS-only users pay nothing
    assert vector_status(store) == (True, "sqlite-vec v0.1.9; no vectors stored yet", 0)
    store.add("fact", "redis runs on port 6379", embedding=emb("redis runs on port 6379"))
    assert {VEC_TABLE, BIT_TABLE, "_vec_meta"} <= tables(store)
    assert store.vectors.dimensions == DIM  # the first vector set the dimension
    available, reason, count = vector_status(store)
    assert available and count == 1 and "64 dimensions, exact KNN" in reason


def test_vec_rows_follow_add_update_invalidate_delete_prune_import(
    store: MemoryStore, tmp_path: Path
) -> None:
    a = store.add("fact", "redis runs on port 6379", embedding=emb("redis runs on port 6379"))
    b = store.add("fact", "deploy with make deploy", embedding=emb("deploy with make deploy"))
    c = store.add("fact", "no vector for this one")
    d = store.add("fact", "the api listens on 8080", embedding=emb("the api listens on 8080"))
    e = store.add(
        "fact", "temporary note", embedding=emb("temporary note"), expires_at="2099-01-01"
    )
    assert set(assert_in_sync(store)) == {seq_of(store, m) for m in (a, b, d, e)}

    store.update(b, embedding=emb("ship it with the deploy script"))
    got = assert_in_sync(store)
    assert got[seq_of(store, b)] == pack_embedding(emb("ship it with the deploy script"))
    store.update(c, embedding=emb("now it has one"))  # a memory gains a vector
    store.update(a, content="redis listens on 6380")  # no embedding change: row untouched
    assert seq_of(store, c) in assert_in_sync(store)

    store.update(d, clear_embedding=True)
    assert seq_of(store, d) not in assert_in_sync(store)
    store.invalidate(c, "wrong")  # invalidation clears the embedding, so the vector goes
    assert seq_of(store, c) not in assert_in_sync(store)
    b_seq = seq_of(store, b)
    store.delete(b)
    assert b_seq not in assert_in_sync(store)
    e_seq = seq_of(store, e)
    store.conn.execute("UPDATE memories SET expires_at = '2000-01-01T00:00:00Z' WHERE id = ?", (e,))
    assert [m["id"] for m in store.prune()] == [e]
    assert e_seq not in assert_in_sync(store)

    data = store.export_all()
    with MemoryStore(tmp_path / "other.db") as other:
        assert other.import_memories(data) == len(data)
        assert len(assert_in_sync(other)) == 1  # only a still has a vector
        hits = other.nearest(pack_embedding(emb("redis port")), limit=3)  # type: ignore[arg-type]
        assert [h["id"] for h in hits] == [a]


def test_a_reused_seq_never_inherits_an_old_vector(tmp_path: Path) -> None:
    """seq is max + 1, so deleting the newest memory frees its seq for the next one."""
    with MemoryStore(tmp_path / "m.db") as st, MemoryStore(tmp_path / "m.db", load_vec=False) as nv:
        st.add("fact", "first", embedding=emb("first"))
        last = st.add("fact", "redis runs on port 6379", embedding=emb("redis runs on port 6379"))
        old_seq = seq_of(st, last)
        nv.delete(last)  # a process without sqlite-vec: the vec row stays behind for now
        new = st.add("fact", "a memory without a vector")
        assert seq_of(st, new) == old_seq
        assert_in_sync(st)
        hits = st.nearest(pack_embedding(emb("redis runs on port 6379")))  # type: ignore[arg-type]
        assert new not in [h["id"] for h in hits]


def test_reconcile_repairs_a_db_written_without_sqlite_vec(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with MemoryStore(path, vec_dimensions=DIM) as st:
        keep = st.add("fact", "redis runs on port 6379", embedding=emb("redis runs on port 6379"))
        gone = st.add("fact", "deploy with make deploy", embedding=emb("deploy with make deploy"))
        moved = st.add("fact", "the api listens on 8080", embedding=emb("the api listens on 8080"))
        dropped = st.add("fact", "the queue is rabbitmq", embedding=emb("the queue is rabbitmq"))
        before = assert_in_sync(st)
    with MemoryStore(path, load_vec=False) as nv:  # as a Python that cannot load extensions
        available, reason, count = vector_status(nv)
        assert not available and "disabled" in reason and count == 4
        assert nv.vectors.dimensions == DIM  # the recorded dimension still applies
        with pytest.raises(ValidationError, match="64-dimensional"):
            nv.add("fact", "wrong size", embedding=[0.1, 0.2])
        new = nv.add("fact", "postgres runs on 5432", embedding=emb("postgres runs on 5432"))
        nv.delete(gone)
        nv.update(moved, embedding=emb("the api moved to port 9090"))
        nv.invalidate(dropped)
        # Semantic search still works, by a Python scan.
        hits = nv.nearest(pack_embedding(emb("postgres port")), limit=1)  # type: ignore[arg-type]
        assert hits[0]["id"] == new
        # The vec rows could not be touched: they are stale now.
        rows = {r[0] for r in nv.conn.execute(f"SELECT rowid FROM {VEC_TABLE}_rowids")}
        assert rows == set(before)
    with MemoryStore(path) as st:  # opening reconciles
        got = assert_in_sync(st)
        assert set(got) == {seq_of(st, m) for m in (keep, moved, new)}
        assert got[seq_of(st, moved)] == pack_embedding(emb("the api moved to port 9090"))
        assert st.conn.execute("SELECT count(*) FROM _vec_pending").fetchone()[0] == 0
        hits = st.nearest(pack_embedding(emb("the api moved to port 9090")), limit=1)  # type: ignore[arg-type]
        assert hits[0]["id"] == moved and hits[0]["_distance"] == pytest.approx(0, abs=1e-5)


def test_reconcile_repairs_missing_and_orphan_rows(tmp_path: Path) -> None:
    """Drift the pending table cannot explain (a writer that knew nothing of vectors)."""
    path = tmp_path / "m.db"
    with MemoryStore(path) as st:
        ids = [st.add("fact", f"memory {i}", embedding=emb(f"memory {i}")) for i in range(5)]
        st.conn.execute(f"DELETE FROM {VEC_TABLE} WHERE rowid = ?", (seq_of(st, ids[1]),))
        st.conn.execute(f"DELETE FROM {BIT_TABLE} WHERE rowid = ?", (seq_of(st, ids[2]),))
        blob = pack_embedding(emb("orphan"))
        st.conn.execute(f"INSERT INTO {VEC_TABLE}(rowid, embedding) VALUES (999, ?)", (blob,))
        st.conn.execute(
            "UPDATE memories SET embedding = ? WHERE id = ?",
            (pack_embedding(emb("written behind our back")), ids[3]),
        )
        st.conn.execute(f"DELETE FROM {VEC_TABLE} WHERE rowid = ?", (seq_of(st, ids[3]),))
        st.conn.execute(f"DELETE FROM {BIT_TABLE} WHERE rowid = ?", (seq_of(st, ids[3]),))
    with MemoryStore(path) as st:
        got = assert_in_sync(st)
        assert len(got) == 5 and 999 not in got
        assert st.vectors.reconcile() == {"added": 0, "removed": 0}  # nothing left to do


def test_dimension_mismatch_is_a_clear_error_and_a_new_dimension_rebuilds(
    tmp_path: Path,
) -> None:
    path = tmp_path / "m.db"
    with MemoryStore(path, vec_dimensions=8) as st:
        mid = st.add("fact", "eight dims", embedding=[1.0, 0, 0, 0, 0, 0, 0, 0])
        with pytest.raises(ValidationError, match=r"has 4 dimensions .* 8-dimensional"):
            st.add("fact", "four dims", embedding=[1.0, 0, 0, 0])
        with pytest.raises(ValidationError, match="8-dimensional"):
            st.update(mid, embedding=[1.0, 0, 0])
        with pytest.raises(ValidationError, match="memory x: embedding has 2"):
            st.import_memories(
                [{"id": "x", "type": "fact", "content": "x", "embedding": [1.0, 2.0]}]
            )
        with pytest.raises(ValidationError, match="8-dimensional"):
            st.nearest(pack_embedding([1.0, 0, 0, 0]))  # type: ignore[arg-type]
        assert st.count() == 1
    with MemoryStore(path, vec_dimensions=16) as st:  # the embedding model changed
        assert st.vectors.dimensions == 16
        assert VEC_TABLE not in tables(st)  # rebuilt empty: no 16-d vector yet
        available, reason, count = vector_status(st)
        assert available and count == 0 and "1 embeddings of another dimension" in reason
        new = st.add("fact", "sixteen dims", embedding=[0.0] * 15 + [1.0])
        assert (
            "float[16]"
            in st.conn.execute(
                "SELECT sql FROM sqlite_master WHERE name = ?", (VEC_TABLE,)
            ).fetchone()[0]
        )
        assert [h["id"] for h in st.nearest(pack_embedding([0.0] * 15 + [1.0]))] == [new]  # type: ignore[arg-type]
    with MemoryStore(path) as st:  # no setting: the recorded dimension is adopted
        assert st.vectors.dimensions == 16


def test_fts_only_when_sqlite_vec_is_unavailable(tmp_path: Path) -> None:
    texts = ["the user prefers pnpm", "redis runs on 6379", "deploy with make deploy-staging"]
    with MemoryStore(tmp_path / "m.db", load_vec=False) as st:
        ids = [st.add("fact", t, embedding=emb(t)) for t in texts]
        assert not tables(st) & {VEC_TABLE, BIT_TABLE}
        available, reason, count = vector_status(st)
        assert (available, count) == (False, 3) and "sqlite-vec" in reason

        class Embedder:
            def embed(self, text: str) -> list[float]:
                return emb(text)

        r = Retriever(st, embedder=Embedder())
        assert r.find("pnpm", track_access=False)[0].id == ids[0]
        sem = r.find("redis 6379", search_mode="semantic", track_access=False)
        assert sem[0].id == ids[1]
    with MemoryStore(tmp_path / "m.db") as st:  # the next open with sqlite-vec indexes them
        assert len(assert_in_sync(st)) == 3


def _unit(vec: list[float]) -> list[float]:
    n = math.sqrt(sum(x * x for x in vec)) or 1.0
    return [x / n for x in vec]


def _exact(store: MemoryStore, query: list[float], k: int) -> list[str]:
    rows = store.conn.execute("SELECT id, embedding FROM memories WHERE embedding IS NOT NULL")
    scored = []
    for mid, blob in rows:
        v = struct.unpack(f"<{len(blob) // 4}f", blob)
        scored.append((-sum(a * b for a, b in zip(query, v, strict=True)), mid))
    return [mid for _, mid in sorted(scored)[:k]]


def test_prefilter_path_above_the_threshold(tmp_path: Path) -> None:
    rng = random.Random(5)
    centers = [_unit([rng.gauss(0, 1) for _ in range(DIM)]) for _ in range(20)]
    with MemoryStore(tmp_path / "m.db", prefilter_threshold=100) as st:
        for i in range(300):
            c = centers[i % 20]
            vec = _unit([x + rng.gauss(0, 0.05) for x in c])
            st.add("fact", f"memory {i}", embedding=vec, project=f"p{i % 3}", dedupe=False)
        available, reason, count = vector_status(st)
        assert available and count == 300 and "binary prefilter" in reason
        statements: list[str] = []
        st.conn.set_trace_callback(statements.append)
        for c in centers[:5]:
            q = pack_embedding(c)
            got = [h["id"] for h in st.nearest(q, limit=5)]  # type: ignore[arg-type]
            assert got == _exact(st, c, 5)
            dists = [h["_distance"] for h in st.nearest(q, limit=5)]  # type: ignore[arg-type]
            assert dists == sorted(dists)  # exact cosine distances after the re-rank
        st.conn.set_trace_callback(None)
        assert any(BIT_TABLE in s and "MATCH" in s for s in statements)
        assert not any(f"FROM {VEC_TABLE} WHERE" in s for s in statements)
    with MemoryStore(tmp_path / "m.db") as st:  # default threshold: exact KNN on the floats
        statements = []
        st.conn.set_trace_callback(statements.append)
        st.nearest(pack_embedding(centers[0]), limit=5)  # type: ignore[arg-type]
        st.conn.set_trace_callback(None)
        assert any(f"FROM {VEC_TABLE} WHERE" in s for s in statements)
        assert not any(BIT_TABLE in s for s in statements)


@pytest.mark.parametrize("threshold", [50_000, 10])
def test_filters_apply_after_knn_with_over_fetch(tmp_path: Path, threshold: int) -> None:
    """Most near neighbours belong to another project, are invalid or expired: the filter
    must still yield the nearest allowed ones (more are fetched, or the filtered rows are
    scanned)."""
    with MemoryStore(tmp_path / "m.db", prefilter_threshold=threshold) as st:
        base = emb("redis runs on port 6379")
        for i in range(150):
            st.add(
                "fact",
                f"noise {i}",
                embedding=_unit([x + 0.01 * (i % 7) for x in base]),
                project="big",
                dedupe=False,
            )
        far = st.add(
            "fact", "the one in project small", embedding=emb("something else"), project="small"
        )
        dead = st.add("fact", "invalidated", embedding=base, project="small")
        st.invalidate(dead)
        old = st.add("fact", "expired", embedding=base, project="small", expires_at="2099-01-01")
        st.conn.execute(
            "UPDATE memories SET expires_at = '2000-01-01T00:00:00Z' WHERE id = ?", (old,)
        )
        q = pack_embedding(base)
        hits = st.nearest(q, MemoryFilter(project="small", project_only=True), limit=5)  # type: ignore[arg-type]
        assert [h["id"] for h in hits] == [far]
        assert len(st.nearest(q, MemoryFilter(project="big"), limit=30)) == 30  # type: ignore[arg-type]
        tagged = st.add("fact", "tagged", embedding=emb("tagged one"), tags=["x"], project="big")
        hits = st.nearest(q, MemoryFilter(tags_all=["x"]), limit=3)  # type: ignore[arg-type]
        assert [h["id"] for h in hits] == [tagged]


def test_vector_status_of_a_store(store: MemoryStore) -> None:
    status: Any = vector_status(store)
    assert status.available is True and isinstance(status.reason, str) and status.stored == 0


def test_a_rolled_back_first_vector_leaves_no_dimension_behind(store: MemoryStore) -> None:
    """The first vector sets the dimension; if its transaction fails, nothing of it stays."""
    with pytest.raises(ValidationError, match="memory b: embedding has 16 dimensions, memory a"):
        store.import_memories(
            [
                {"id": "a", "type": "fact", "content": "a", "embedding": [1.0] * 8},
                {"id": "b", "type": "fact", "content": "b", "embedding": [1.0] * 16},
            ]
        )

    class Boom(Exception):
        pass

    with pytest.raises(Boom), store.atomic():
        store.add("fact", "eight", embedding=[1.0] * 8)
        assert store.vectors.dimensions == 8 and VEC_TABLE in tables(store)
        raise Boom
    assert store.count() == 0 and VEC_TABLE not in tables(store)
    mid = store.add("fact", "sixteen", embedding=[1.0] * 16)
    assert store.vectors.dimensions == 16 and len(assert_in_sync(store)) == 1
    assert [h["id"] for h in store.nearest(pack_embedding([1.0] * 16))] == [mid]  # type: ignore[arg-type]


def test_project_searches_cover_own_and_global_memories_exactly(tmp_path: Path) -> None:
    """A project filter searches the project's memories (scanned when few, KNN in the
    project partition when many) plus the global partition; the result is the exact
    nearest of that set, whatever the other projects hold."""
    rng = random.Random(11)

    def rand() -> list[float]:
        return _unit([rng.gauss(0, 1) for _ in range(16)])

    records: list[dict[str, Any]] = []
    for i, (project, n) in enumerate((("big", OWN_SCAN_MAX + 50), ("small", 30), (None, 60))):
        for j in range(n):
            records.append(
                {
                    "id": f"m{i}-{j}",
                    "type": "fact",
                    "content": f"memory {i} {j}",
                    "project": project,
                    "embedding": rand(),
                }
            )
    for j in range(300):  # other projects crowd the neighbourhood of every query
        records.append(
            {
                "id": f"o-{j}",
                "type": "fact",
                "content": f"other {j}",
                "project": f"o{j % 7}",
                "embedding": rand(),
            }
        )
    with MemoryStore(tmp_path / "m.db") as st:
        st.import_memories(records)
        assert_in_sync(st)
        vec = {r["id"]: r["embedding"] for r in records}
        proj = {r["id"]: r["project"] for r in records}

        def exact(q: list[float], allowed: set[str | None], k: int) -> list[str]:
            scored = sorted(
                (-sum(a * b for a, b in zip(q, v, strict=True)), mid)
                for mid, v in vec.items()
                if proj[mid] in allowed
            )
            return [mid for _, mid in scored[:k]]

        for _ in range(5):
            q = rand()
            qb = pack_embedding(q)
            for flt, allowed in (
                (MemoryFilter(project="small"), {"small", None}),
                (MemoryFilter(project="small", project_only=True), {"small"}),
                (MemoryFilter(project="big"), {"big", None}),
                (MemoryFilter(project="big", project_only=True), {"big"}),
                (MemoryFilter(), set(proj.values())),
            ):
                got = [h["id"] for h in st.nearest(qb, flt, limit=8)]  # type: ignore[arg-type]
                assert got == exact(q, allowed, 8), flt


def test_doctor_shows_the_vector_status(tmp_path: Path) -> None:
    import copy

    from llmem_hooks.agents.doctor import _vector_checks
    from llmem_hooks.config import DEFAULT_CONFIG, Config

    with MemoryStore(tmp_path / "m.db", load_vec=False) as st:
        _, check = _vector_checks(Config(), st)
        assert check.status == "warn" and "search is FTS-only" in check.detail
    with MemoryStore(tmp_path / "m.db") as st:
        st.add("fact", "eight dims", embedding=[1.0] * 8)
        _, check = _vector_checks(Config(), st)  # the config says 768
        assert check.status == "warn" and "memory.vec_dimensions is 768" in check.detail
        cfg = copy.deepcopy(DEFAULT_CONFIG)
        cfg["memory"]["vec_dimensions"] = 8
        _, check = _vector_checks(Config.from_mapping(cfg), st)
        assert check.status == "ok" and "1 vectors of 8 dimensions, exact KNN" in check.detail


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    from llmem_hooks.cli import main

    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _write_config(home: Path, base_url: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(f"ollama:\n  base_url: {base_url}\n  timeout_seconds: 5\n")


def test_cli_search_is_hybrid_when_the_embedder_answers(
    fake_ollama: tuple[Any, str], llmem_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    srv, url = fake_ollama
    _write_config(llmem_home, url)
    texts = ["redis runs on port 6379 in staging", "the user prefers pnpm over npm"]
    with MemoryStore(llmem_home / "memory.db", vec_dimensions=768) as st:
        ids = [st.add("fact", t, embedding=embed_text(t, 768)) for t in texts]
    code, out, err = _cli(capsys, "search", "redis port", "--json")
    assert (code, err) == (0, "")
    hits = json.loads(out)
    assert hits[0]["id"] == ids[0] and hits[0]["match"] == "fts"
    assert {h["id"] for h in hits} == set(ids)  # the semantic half adds the other memory
    assert srv.control.bodies("/api/embed")  # the query was embedded (once: cached)
    assert len(srv.control.bodies("/api/embed")) == 1
    code, out, _ = _cli(capsys, "search", "redis port", "--mode", "semantic", "--json")
    assert code == 0 and [h["match"] for h in json.loads(out)] == ["semantic", "semantic"]
    code, out, _ = _cli(capsys, "search", "redis port", "--mode", "fts", "--json")
    assert code == 0 and [h["id"] for h in json.loads(out)] == [ids[0]]
    assert len(srv.control.bodies("/api/embed")) == 2  # fts mode asks nothing
    code, _, err = _cli(capsys, "search", "redis", "--mode", "psychic")
    assert code == 2 and "invalid --mode" in err


def test_cli_search_falls_back_to_fts_quietly_without_an_embedder(
    llmem_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    _write_config(llmem_home, f"http://127.0.0.1:{port}")
    with MemoryStore(llmem_home / "memory.db", vec_dimensions=768) as st:
        mid = st.add("fact", "redis runs on port 6379", embedding=embed_text("redis", 768))
        st.add("fact", "the user prefers pnpm", embedding=embed_text("pnpm", 768))
    code, out, err = _cli(capsys, "search", "redis port", "--json")
    assert (code, err) == (0, "")  # no warning about the missing embedder
    assert [h["id"] for h in json.loads(out)] == [mid]
    code, _, err = _cli(capsys, "search", "redis", "--mode", "semantic")
    assert code == 1 and "semantic search needs an embedder" in err


def test_the_driver_chosen_loads_sqlite_vec_and_is_named() -> None:
    """The stdlib sqlite3 when it can load extensions, else sqlean-py: either way the
    chosen driver loads sqlite-vec on this machine (sqlean-py is a dependency)."""
    from llmem_hooks.store.db import _driver, _loads_vec, driver_name

    assert _loads_vec(_driver())
    assert "SQLite 3." in driver_name()
