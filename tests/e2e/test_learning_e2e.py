"""End-to-end: what users say in their own words is learned, with the messages exactly as
the agents store them.

1. ``opencode run "remember that ..."``: one quoted argument, unsplit (OpenCode wraps a
   multi-word argument in double quotes before it stores the message);
2. ``opencode run`` with a trailing marker ("... Please remember that.") and a leading one
   ("For future reference, ...");
3. ``opencode run "We've moved from X to Y"``: the new state is stored and the memory that
   said X is superseded (invalidated, with a ``supersedes`` relation);
4. the Copilot CLI's ``-p`` with a natural phrasing ("Just so you know, ...").

Real OpenCode / Copilot CLI binaries against the fake provider, one sidecar per world
(see oc_harness.py / copilot_harness.py; they skip when the npm registry is unreachable).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from copilot_harness import CopilotEnv
from oc_harness import OpenCodeEnv, SidecarProcess, user_texts, wait_until

pytestmark = [pytest.mark.e2e]

MEMORY_WAIT_S = 20
KNOWLEDGE_TYPES = {"fact", "decision", "preference", "project_state", "procedure"}


def run_unsplit(world: OpenCodeEnv, message: str) -> str:
    """``opencode run --format json "<message>"``: the whole message as ONE argument."""
    return world.run(message, split=False)


def knowledge_with(world: OpenCodeEnv | CopilotEnv, token: str) -> list[dict[str, Any]]:
    return [
        m
        for m in world.memories()
        if m["type"] in KNOWLEDGE_TYPES and token.lower() in m["content"].lower()
    ]


@pytest.mark.opencode
def test_a_quoted_opencode_run_message_is_learned(
    oc_env: OpenCodeEnv, oc_sidecar: SidecarProcess
) -> None:
    sid = run_unsplit(oc_env, "remember that the deploy runs at 06:00 UTC on weekdays")
    # The message reached the model as OpenCode stored it: wrapped in double quotes.
    sent = " ".join(t for r in oc_env.fake.chat_requests(sid) for t in user_texts(r))
    assert '"remember that the deploy runs at 06:00 UTC on weekdays"' in sent, sent[:2000]
    hits = wait_until(
        lambda: knowledge_with(oc_env, "06:00 UTC"),
        MEMORY_WAIT_S,
        0.3,
        f"the quoted remember-that memory\n{oc_sidecar.log()}",
    )
    assert [m["content"] for m in hits] == ["The deploy runs at 06:00 UTC on weekdays."]
    assert hits[0]["session_id"] == sid and hits[0]["type"] == "fact"


@pytest.mark.opencode
@pytest.mark.parametrize(
    ("message", "token", "content"),
    [
        (
            "The nightly backup job runs in UTC (MARKER-TRAIL). Please remember that.",
            "MARKER-TRAIL",
            "The nightly backup job runs in UTC (MARKER-TRAIL).",
        ),
        (
            "For future reference, the feature flags live in config/flags-e2e.yaml",
            "flags-e2e",
            "The feature flags live in config/flags-e2e.yaml.",
        ),
    ],
)
def test_natural_phrasings_are_learned_from_opencode(
    oc_env: OpenCodeEnv, oc_sidecar: SidecarProcess, message: str, token: str, content: str
) -> None:
    run_unsplit(oc_env, message)
    hits = wait_until(
        lambda: knowledge_with(oc_env, token), MEMORY_WAIT_S, 0.3, f"the memory with {token}"
    )
    assert [m["content"] for m in hits] == [content]


@pytest.mark.opencode
def test_a_change_of_state_supersedes_the_old_memory(
    oc_env: OpenCodeEnv, oc_sidecar: SidecarProcess
) -> None:
    oc_env.llmem("store", "CI runs on Jenkinsfoo with two agents", "--project", oc_env.project_key)
    (old,) = knowledge_with(oc_env, "Jenkinsfoo")
    run_unsplit(oc_env, "We've moved from Jenkinsfoo to GitHub Actions.")
    new = wait_until(
        lambda: [m for m in knowledge_with(oc_env, "GitHub Actions") if m["id"] != old["id"]],
        MEMORY_WAIT_S,
        0.3,
        "the change-of-state memory",
    )
    assert new[0]["type"] == "decision"
    assert [m["id"] for m in knowledge_with(oc_env, "Jenkinsfoo")] == [new[0]["id"]]
    everything = json.loads(oc_env.llmem("list", "--json", "--all", "--limit", "1000").stdout)
    (stale,) = [m for m in everything if m["id"] == old["id"]]
    assert stale["valid_until"] and "superseded by" in stale["invalidation_reason"]


@pytest.mark.copilot
def test_a_copilot_dash_p_message_is_learned(
    cp_env: CopilotEnv, cp_sidecar: SidecarProcess
) -> None:
    run = cp_env.prompt("Just so you know, the e2e database listens on port 5544.")
    hits = wait_until(
        lambda: knowledge_with(cp_env, "5544"),
        MEMORY_WAIT_S,
        0.3,
        f"the copilot memory\n{cp_env.sidecar_log()}",
    )
    assert [m["content"] for m in hits] == ["The e2e database listens on port 5544."]
    assert hits[0]["session_id"] == run.session_id and hits[0]["entered_by"] == "copilot"
