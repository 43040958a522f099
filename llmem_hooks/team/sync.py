"""Push and pull: the local store's outbox to the hub, the hub's mutations to the store.

The hub is never on the hot path: the sidecar's team thread (or ``team sync``) calls
`TeamSync.sync`; hooks, recall and the agent tools only ever read the local store.

- **Push** reads a batch from the outbox (the store's triggers queue every change of a
  shared memory in the same transaction as the change), sends it in one hub transaction,
  then acks what the hub took. A batch killed anywhere is sent again: the hub's rule makes
  a re-sent item a no-op (STALE), so nothing is lost and nothing doubles. A change of
  someone else's memory goes up as a new memory that supersedes it (link, not overwrite);
  its id is derived from what it replaces, so a re-sent one is the same memory.
- **Pull** asks, per enrolled project, for the mutations after the stored cursor; each is
  applied through the store's normal add path and the cursor moves in the same local
  transaction, so a crash re-applies nothing twice and skips nothing.
- Projects: every project the hub lets this role read is enrolled on first sight (with
  the configured policy); one it no longer may read is left (its local memories stay).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import faults
from ..errors import LLMemError, ValidationError
from ..store import projects as project_names
from ..store import team as local
from ..timestamps import now_iso

if TYPE_CHECKING:
    from ..config import TeamSettings
    from ..store import MemoryStore
    from ..store.hub import Hub

log = logging.getLogger(__name__)

# Ids of memories that supersede someone else's: one per (memory, revision, device), so a
# push sent twice creates the memory once.
SUPERSEDE_NAMESPACE = uuid.UUID("6f0b3c52-58a4-4d55-9d2b-5f4f3f6e2a11")
PULL_PAGE = 500
MAX_PULL_PAGES = 200  # per project and sync: a long way behind catches up over several passes


@dataclass
class SyncReport:
    """What one sync did (``team sync`` prints it; the sidecar logs it when not empty)."""

    pushed: int = 0
    stale: int = 0
    superseded: int = 0
    refused: int = 0
    pulled: int = 0
    applied: dict[str, int] = field(default_factory=dict)
    enrolled: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)  # project -> what the hub refused
    seconds: float = 0.0

    def empty(self) -> bool:
        return not (self.pushed or self.superseded or self.pulled or self.enrolled or self.left)

    def as_dict(self) -> dict[str, Any]:
        return {
            "pushed": self.pushed,
            "stale": self.stale,
            "superseded": self.superseded,
            "refused": self.refused,
            "pulled": self.pulled,
            "applied": dict(self.applied),
            "enrolled": list(self.enrolled),
            "left": list(self.left),
            "errors": dict(self.errors),
            "seconds": round(self.seconds, 3),
        }


def superseding_id(hub_id: str, revision: int, device: str) -> str:
    return str(uuid.uuid5(SUPERSEDE_NAMESPACE, f"{hub_id}:{revision}:{device}"))


class TeamSync:
    """One store, one hub connection: push, pull, enroll. Not thread-safe: one per thread."""

    def __init__(
        self,
        store: MemoryStore,
        hub: Hub,
        settings: TeamSettings,
        *,
        names: Callable[[str], str | None] | None = None,
    ) -> None:
        self.store = store
        self.hub = hub
        self.settings = settings
        self.device = local.device_id(store.db)
        self._names = names

    # -- projects ----------------------------------------------------------------------------
    def enroll_known(self) -> tuple[list[str], list[str]]:
        """Enroll every hub project this role may read; leave enrolled ones it may not."""
        listed = self.hub.projects()
        readable = {key for key, _name in listed}
        for key, name in listed:  # a pulled memory shows the project's name, not its hash
            if name and project_names.name_of(self.store.db, key) is None:
                project_names.set_name(self.store.db, key, name)
        enrolled = {p.project for p in local.projects(self.store.db)}
        added = sorted(readable - enrolled)
        gone = sorted(enrolled - readable)
        for key in added:  # what the project's policy shares, held here already, goes too
            local.enroll(self.store.db, key, self.settings.share_types, existing=True)
        for key in gone:
            local.leave(self.store.db, key)
        return added, gone

    # -- push --------------------------------------------------------------------------------
    def _hub_item(self, item: Any) -> tuple[Any, str | None]:
        """The hub record for an outbox item, and the new hub id when it supersedes
        someone else's memory changed here. Its texts were redacted by `outbox_batch`,
        and `Hub.push` redacts them again as they leave."""
        from ..store.hub import HubMemory

        updated = item.updated_at or now_iso()
        new_id = None
        if item.author is not None:  # someone else's memory, changed here: supersede it
            new_id = superseding_id(item.hub_id, item.revision, self.device)
        deleted = new_id is None and (item.op == "delete" or item.deleted)
        record = HubMemory(
            id=new_id or item.hub_id,
            project=item.project,
            type=item.type if new_id else item.type or "fact",
            content=item.content or "(removed)",
            revision=1 if new_id else item.revision,
            updated_at=updated,
            device=self.device,
            tags=tuple(t for t in item.tags or () if t),
            provenance={
                "source": item.source or "manual",
                "confidence": item.confidence,
                "created_at": item.created_at,
            },
            deleted_at=updated if deleted else None,
            supersedes=item.hub_id if new_id else item.supersedes,
            created_at=item.updated_at if new_id else item.created_at,
        )
        return record, new_id

    def _one_by_one(
        self,
        sendable: list[tuple[Any, Any, str | None]],
        report: SyncReport,
        refused: dict[str, str],
    ) -> tuple[list[tuple[Any, Any, str | None]], list[Any]]:
        kept: list[tuple[Any, Any, str | None]] = []
        outcomes: list[Any] = []
        for entry in sendable:
            item, record, _ = entry
            try:
                outcomes.extend(self.hub.push([record]))
                kept.append(entry)
            except ValidationError as exc:
                report.refused += 1
                log.warning("team: memory %s not sent: %s", item.memory_id[:12], exc)
                refused[record.project] = f"not sent: {exc}"
                local.record_push(self.store.db, record.project, refused[record.project])
                local.ack(self.store.db, item.memory_id, item.queued_at, item.revision)
        return kept, outcomes

    def push(self, report: SyncReport) -> None:
        """Send the outbox, a batch at a time, until it is empty or the hub refuses."""
        from ..store.hub import PushOutcome

        while True:
            items = local.outbox_batch(self.store.db, self.settings.batch)
            if not items:
                return
            sendable: list[tuple[Any, Any, str | None]] = []
            for item in items:
                if item.foreign and item.deleted:
                    # Someone else's memory forgotten here: theirs stays on the hub; the
                    # forgetting is this machine's own business.
                    local.ack(self.store.db, item.memory_id, item.queued_at, item.revision)
                    continue
                record, new_id = self._hub_item(item)
                sendable.append((item, record, new_id))
            if not sendable:
                continue
            refused: dict[str, str] = {}
            try:
                outcomes = self.hub.push([record for _, record, _ in sendable])
            except ValidationError:
                # One item the hub will never take (it names it) must not hold back the
                # rest: send them one by one and drop the ones refused, each said once.
                sendable, outcomes = self._one_by_one(sendable, report, refused)
            except Exception:
                local.record_attempt(self.store.db, [item.memory_id for item, _, _ in sendable])
                raise
            if not sendable:
                continue
            faults.hit("team-pushed")
            progressed = False
            for (item, record, new_id), outcome in zip(sendable, outcomes, strict=True):
                if outcome in (PushOutcome.APPLIED, PushOutcome.STALE):
                    local.ack(self.store.db, item.memory_id, item.queued_at, item.revision, new_id)
                    progressed = True
                    if outcome == PushOutcome.STALE:
                        report.stale += 1
                    elif new_id is not None:
                        report.superseded += 1
                    else:
                        report.pushed += 1
                else:  # DENIED (not a writer) or FOREIGN: kept, and said in `team status`
                    report.refused += 1
                    refused[record.project] = f"the hub refused a change ({outcome})"
            report.errors.update(refused)
            for project in {record.project for _, record, _ in sendable}:
                local.record_push(self.store.db, project, refused.get(project))
            if not progressed:
                return

    # -- pull --------------------------------------------------------------------------------
    def pull(self, report: SyncReport, projects: Sequence[str] | None = None) -> None:
        me = self.hub.role
        for project in projects or [p.project for p in local.projects(self.store.db)]:
            for _ in range(MAX_PULL_PAGES):
                after = local.cursor(self.store.db, project)
                mutations = self.hub.pull(project, after, PULL_PAGE)
                for mutation in mutations:
                    what = local.apply_remote(self.store, mutation, me, self.device)
                    faults.hit("team-mid-pull")
                    report.pulled += 1
                    report.applied[what] = report.applied.get(what, 0) + 1
                local.record_pull(self.store.db, project)
                if len(mutations) < PULL_PAGE:
                    break

    def sync(self) -> SyncReport:
        """Enroll, push, pull: one pass."""
        started = time.monotonic()
        report = SyncReport()
        try:
            report.enrolled, report.left = self.enroll_known()
            self.push(report)
            self.pull(report)
            for key, error in report.errors.items():  # a pull must not clear it
                local.record_push(self.store.db, key, error)
        except LLMemError as exc:  # said in `team status` and `doctor`, then raised
            for project in local.projects(self.store.db):
                local.record_pull(self.store.db, project.project, str(exc))
            raise
        report.seconds = time.monotonic() - started
        return report
