"""What travels between a machine and the team hub: a shared memory, a change, an outcome.

Plain frozen dataclasses with no PostgreSQL types, so the sync engine and the tests use
them without importing psycopg (the ``team`` extra)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


@dataclass(frozen=True)
class HubMemory:
    """One shared memory as the hub holds it. ``author`` is set by the hub (the PostgreSQL
    role that wrote it) and ignored on push; ``deleted_at`` marks a tombstone, whose
    content the hub blanks. ``provenance`` carries source, confidence and created_at only:
    never transcripts, prompts, session ids or paths."""

    id: str
    project: str
    type: str
    content: str
    revision: int
    updated_at: str
    device: str
    tags: tuple[str, ...] = ()
    provenance: Mapping[str, Any] = field(default_factory=dict)
    deleted_at: str | None = None
    supersedes: str | None = None
    author: str = ""
    embedding: tuple[float, ...] | None = None
    created_at: str | None = None


@dataclass(frozen=True)
class Mutation:
    """A memory that changed on the hub after a puller's cursor: ``seq`` is the project's
    sequence number of its latest change, ``memory`` its state now (author filled in)."""

    seq: int
    memory: HubMemory


class PushOutcome(StrEnum):
    """What the hub did with one pushed memory."""

    APPLIED = "applied"  # written
    STALE = "stale"  # the hub has this or newer (or a tombstone): a re-sent batch is a no-op
    FOREIGN = "foreign"  # the id exists with another author: supersede it with a new id
    DENIED = "denied"  # not a writer of that project
