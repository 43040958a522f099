"""The viewer's review of stale memories (docs/viewer.md, "Stale memories"): the list, and
what a person decides for each: it still holds (confirm), its citation points elsewhere
now (fix), or it is wrong (forget, `ViewerData.forget`).

Both changes re-read the cited lines from the working tree of the memory's project: the
folder of its most recent session (`citation_review.project_directory`), up to its git
repository's top. Without one the change is refused: a citation is never written from a
guess. Paths stay inside that repository (`evidence.cite`: no absolute path, no ``..``, no
symlink out of it).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import NotFoundError, ValidationError
from ..evidence.cite import Citation, capture, head_commit, parse, read_lines, repo_root
from ..store import citation_review, citations

if TYPE_CHECKING:
    from ..store import MemoryStore

STALE_LIMIT = 200  # stale memories the review list shows


def stale_list(store: MemoryStore, limit: int = STALE_LIMIT) -> list[dict[str, Any]]:
    """The memories to review, most recently found stale first: each memory (as stored)
    with ``stale_reason`` and its citations (`citations.shown`)."""
    mems = citation_review.stale_memories(store.db, limit)
    ids = [m["id"] for m in mems]
    reasons = citation_review.stale_reasons(store.db, ids)
    cites = citations.of_memories(store.db, ids)
    return [
        {**m, "stale_reason": reasons.get(m["id"]), **citations.shown(cites.get(m["id"], []))}
        for m in mems
    ]


def working_tree(store: MemoryStore, mem: Mapping[str, Any]) -> Path:
    """The top of the git repository of the memory's project as its latest session saw it;
    ValidationError (one line) when none is known or it is gone."""
    directory = citation_review.project_directory(store.db, mem.get("project"))
    if directory is None:
        raise ValidationError(
            "no session of this memory's project is known: its files cannot be read here"
        )
    if not Path(directory).is_dir():
        raise ValidationError(f"the project's folder {directory} is gone")
    root = repo_root(Path(directory))
    if root is None:
        raise ValidationError(f"the project's folder {directory} is not in a git repository")
    return root


def _live(store: MemoryStore, memory_id: Any) -> dict[str, Any]:
    if not isinstance(memory_id, str) or not memory_id:
        raise ValidationError("give a memory id")
    mem = store.get(store.resolve_id(memory_id))
    if mem is None:  # pragma: no cover - resolve_id found it
        raise NotFoundError(f"no memory with id {memory_id!r}")
    if mem.get("valid_until"):
        raise ValidationError(f"memory {mem['id']} is forgotten")
    return mem


def confirm(store: MemoryStore, memory_id: Any) -> dict[str, Any]:
    """The person says the memory still holds: each citation whose file is still there is
    captured again from the working tree (its lines as they are now) and recorded valid;
    one whose file is gone, or now shorter than the cited lines, is dropped. Returns
    ``{"id", "kept": [specs], "dropped": [specs]}``."""
    mem = _live(store, memory_id)
    old = citations.of_memory(store.db, mem["id"])
    if not old:
        raise ValidationError(f"memory {mem['id']} cites no code")
    root = working_tree(store, mem)
    commit = head_commit(root)
    kept: list[Citation] = []
    dropped: list[str] = []
    for c in old:
        wanted = Citation(c.path, c.line_start, c.line_end)
        lines = read_lines(root, c.path)
        if lines is None or c.line_start > len(lines):
            dropped.append(c.spec())
            continue
        kept.append(capture(root, wanted, commit))
    citation_review.rewrite(store.db, mem["id"], [c.id for c in old], kept)
    return {"id": mem["id"], "kept": [c.spec() for c in kept], "dropped": dropped}


def fix(store: MemoryStore, memory_id: Any, spec: Any, replace: Any = None) -> dict[str, Any]:
    """The memory's stale citation (``replace``: the spec of the one to replace; default:
    every stale one) becomes ``spec`` (``path:12-30``), captured from the working tree and
    recorded valid. Returns ``{"id", "citation": spec}``."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValidationError("give the new citation as path:START-END")
    if replace is not None and not isinstance(replace, str):
        raise ValidationError("replace must be a citation such as path:12-30")
    wanted = parse(spec)
    mem = _live(store, memory_id)
    old = citations.of_memory(store.db, mem["id"])
    drop = [c for c in old if (c.spec() == replace if replace else c.status == "stale")]
    if replace and not drop:
        raise ValidationError(f"memory {mem['id']} has no citation {replace}")
    root = working_tree(store, mem)
    new = capture(root, wanted)
    citation_review.rewrite(store.db, mem["id"], [c.id for c in drop], [new])
    return {"id": mem["id"], "citation": new.spec()}
