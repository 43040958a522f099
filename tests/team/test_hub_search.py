"""Search on the hub: any of the question's words through the tsvector's GIN index, ranked
by ts_rank_cd, fused with the nearest vectors when pgvector is there; never a tombstone,
never a project the person is not on."""

from __future__ import annotations

import pytest
from support.pg import HubDb, Team, make_team, memory

DIMS = 768


def _unit(i: int) -> tuple[float, ...]:
    vec = [0.0] * DIMS
    vec[i] = 1.0
    return tuple(vec)


def _seed(team: Team) -> None:
    with team.alice.hub() as hub:
        hub.push(
            [
                memory(team.key, "deploy", "Deployments go through the blue green pipeline"),
                memory(
                    team.key,
                    "deploy2",
                    "Deploying on Fridays needs a second reviewer; deploy with care",
                ),
                memory(team.key, "db", "The database migrations run before the deploy step"),
                memory(team.key, "tabs", "Indent with four spaces", tags=("style",)),
                memory(team.key, "gone", "Deploy by hand from a laptop"),
            ]
        )
        hub.push([memory(team.key, "gone", "", deleted_at="2026-11-27T12:00:00Z")])
    with team.carol.hub() as hub:
        hub.push([memory(team.other, "carol", "Deploy carol's thing on Mondays")])


def test_any_word_matches_ranked_by_how_well_it_matches(team: Team) -> None:
    _seed(team)
    with team.bob.hub() as hub:
        found = hub.search([team.key], ["deploy", "friday"])
        ids = [m.id for m, _ in found]
        assert ids[0] == "deploy2"  # both words, and 'deploy' twice (stemmed: deploying)
        assert set(ids) == {"deploy", "deploy2", "db"}  # not the tombstone, not carol's
        scores = [s for _, s in found]
        assert scores == sorted(scores, reverse=True)
        assert hub.search([team.key], ["style"])[0][0].id == "tabs"  # tags are searched
        assert hub.search([team.key], ["deploy"], limit=1)[0][0].id in {"deploy", "deploy2"}
        assert len(hub.search([team.key], ["deploy"], limit=1)) == 1
        # nothing to search with: no words that mean anything, no projects
        assert hub.search([team.key], ["the", "a", "   "]) == []
        assert hub.search([], ["deploy"]) == []
        assert hub.search([team.key], []) == []
        # odd input is words, never query syntax
        assert hub.search([team.key], ["deploy & !", "':*", "|", "(("]) != []
        assert hub.search([team.key, team.other], ["mondays"]) == []


def test_a_search_reads_only_the_projects_of_the_person(team: Team) -> None:
    _seed(team)
    with team.carol.hub() as hub:
        assert [m.id for m, _ in hub.search([team.key, team.other], ["deploy"])] == ["carol"]


def test_vectors_find_what_no_word_matches_and_fuse_with_words(team: Team) -> None:
    with team.alice.hub() as hub:
        assert hub.has_vectors()
        hub.push(
            [
                memory(
                    team.key,
                    "v1",
                    "Cache invalidation lives in the gateway",
                    embedding=tuple(-x for x in _unit(3)),
                ),
                memory(team.key, "v2", "Retries back off exponentially", embedding=_unit(2)),
                memory(team.key, "v3", "The gateway retries twice", embedding=_unit(3)),
                memory(team.key, "wrong-size", "short vector", embedding=(1.0, 0.0)),
            ]
        )
        near = hub.search([team.key], ["nothingmatches"], embedding=_unit(2))
        assert near[0][0].id == "v2"
        both = hub.search([team.key], ["gateway"], embedding=_unit(3))
        assert both[0][0].id == "v3"  # a word match and the nearest vector: fused first
        hub.push([memory(team.key, "v2", "", deleted_at="2026-11-27T12:00:00Z")])
        assert "v2" not in [m.id for m, _ in hub.search([team.key], [], embedding=_unit(2))]
    with team.carol.hub() as hub:
        assert hub.search([team.key], [], embedding=_unit(2)) == []


def test_without_pgvector_search_uses_words_only(hub_db: HubDb) -> None:
    team = make_team(hub_db, vectors=False)
    with team.alice.hub() as hub:
        assert not hub.has_vectors()
        hub.push([memory(team.key, "m", "Gateway retries twice", embedding=_unit(1))])
        assert [m.id for m, _ in hub.search([team.key], ["gateway"], embedding=_unit(1))] == ["m"]
        assert hub.search([team.key], [], embedding=_unit(1)) == []
        assert hub.pull(team.key, 0)[0].memory.embedding is None


def test_the_search_query_uses_the_gin_index(team: Team) -> None:
    _seed(team)
    with team.db.cluster.admin(team.db.name) as conn:
        conn.execute("SET enable_seqscan = off")
        plan = "\n".join(
            r[0]
            for r in conn.execute(
                "EXPLAIN SELECT id FROM llmem.memories m "
                "WHERE m.tsv @@ to_tsquery('english', 'deploy') AND m.deleted_at IS NULL"
            ).fetchall()
        )
    assert "memories_tsv" in plan


@pytest.mark.parametrize("limit", [0, -3, 10_000])
def test_limits_are_clamped(team: Team, limit: int) -> None:
    _seed(team)
    with team.bob.hub() as hub:
        found = hub.search([team.key], ["deploy"], limit=limit)
        assert 1 <= len(found) <= 200
