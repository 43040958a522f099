"""What `search` gives a tool besides its line (issue 20 §3): each hit's project and
score, so the MCP server can return structured results; an unknown ``type`` is an error,
not an empty result that reads as "no such memory" (the OpenCode plugin sends it as is)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from llmem_hooks import MemoryStore
from llmem_hooks.service import protocol as proto
from llmem_hooks.service.operations import QueryService, ServiceError

NO_MODEL = {"ollama": {"enabled": False}}


@pytest.fixture
def svc(store: MemoryStore) -> Iterator[QueryService]:
    with QueryService(store, NO_MODEL) as service:
        yield service


def test_hits_carry_project_and_score_best_first(svc: QueryService) -> None:
    svc.remember("The billing worker listens on port 7077 in staging", project="p-billing")
    svc.remember("Port 7077 is the billing worker's port", type="procedure")
    hits = svc.search("billing worker port 7077", project="p-billing")["results"]
    assert len(hits) == 2
    assert {h["project"] for h in hits} == {"p-billing", None}  # the project's and a global one
    scores = [h["score"] for h in hits]
    assert all(isinstance(s, float) and s > 0 for s in scores)
    assert scores == sorted(scores, reverse=True)


def test_an_unknown_type_is_an_error_that_names_the_known_ones(svc: QueryService) -> None:
    svc.remember("The billing worker listens on port 7077 in staging")
    with pytest.raises(ServiceError, match=r"unknown memory type 'facts'.*decision") as err:
        svc.search("billing", type="facts")
    assert err.value.code == proto.BAD_PARAMS
    assert svc.search("billing", type="fact")["results"]
    assert svc.search("billing", type="decision")["results"] == []
