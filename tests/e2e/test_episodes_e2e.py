"""End-to-end: a later session finds what an earlier session discussed (issue 11, episodes).

A real ``opencode run "..."`` (one unsplit argument) says something no heuristic learns
(a question with a detail in it); the running sidecar stores the exchange as a
``conversation`` episode; a later ``llmem-hooks search`` in the same repository finds it,
with its provenance (session id, time). Real OpenCode against the fake provider.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from oc_harness import OpenCodeEnv, SidecarProcess, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.opencode]

EPISODE_WAIT_S = 30


def search(world: OpenCodeEnv, query: str) -> list[dict[str, Any]]:
    out = world.llmem("search", query, "--json", "--limit", "10").stdout
    return list(json.loads(out))


def test_a_later_search_finds_an_earlier_exchange_with_provenance(
    oc_env: OpenCodeEnv, oc_sidecar: SidecarProcess
) -> None:
    message = (
        "Which queue should the thumbnail worker use? I was looking at zorblax-queue "
        "because it retries with jitter."
    )
    sid = oc_env.run(message, split=False)

    def found() -> list[dict[str, Any]]:
        return [
            hit
            for hit in search(oc_env, "queue for the thumbnail worker")
            if hit["type"] == "conversation" and "zorblax-queue" in hit["content"]
        ]

    hits = wait_until(found, EPISODE_WAIT_S, 0.5, f"the episode\n{oc_sidecar.log()}")
    hit = hits[0]
    assert hit["session_id"] == sid
    assert hit["time"]  # when it was said, for "when ..." questions
    assert "User:" in hit["content"] and "Assistant:" in hit["content"]
    # Not a learned fact: the heuristics keep questions out; the episode holds it.
    learned = {"fact", "decision", "preference", "procedure"}
    facts = [m for m in oc_env.memories() if m["type"] in learned]
    assert not any("zorblax" in m["content"] for m in facts)
