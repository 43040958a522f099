"""The store: every table of the memory database, and the only package that runs SQL.

``from llmem_hooks.store import MemoryStore`` is the public door. Who owns which table:

- `memories`  MemoryStore: ``memories``, ``tags``, ``memory_tags``, ``memories_fts``
- `vocabulary` ``fuzzy_terms``, ``fuzzy_trigrams`` (the typo-tolerance index)
- `vectors`   the sqlite-vec tables and the filtered nearest-neighbour planner
- `relations` ``relations``;  `inbox` ``inbox``;  `archive` export / import files
- `sessions`  ``sessions``, ``extraction_log`` (adapter cursors), ``pending_hooks``,
  ``model_usage`` (was ``llmem_hooks.session_state``; imported as a module of functions)
- `records`   validators, `Memory`, `MemoryFilter`, row -> `Memory`, embedding packing
- `tags`      ``tags``, ``memory_tags`` (written inside the memory write that sets them)
- `recall`    ``recall_given``;  `browse` the viewer's counts and undo;  `episodes` retention
- `projects`  ``project_names`` (a project key -> the name people know)
- `citations` ``citations`` (a memory's code citations and what their last check found)
- `dream`     the dream cycle's book: ``dream_runs``, ``dream_changes``, ``dream_state``
- `team`      team memory's local side: ``team_projects``, ``team_policy``, ``team_links``,
  ``team_outbox``, ``team_state`` (queued by migration 16's triggers; docs/team.md)
- `db`        connections, transactions, and `Database`;  `migrations` the schema

One seam: `MemoryStore` owns a `Database` (``store.db``: the connection, its lock,
``fetchone``/``fetchall``/``execute``, ``transaction()``, ``time_limit``). Table modules take
that object, never the store's private attributes. Callers use one door per concern:

- ``store.<method>``: the memories and what belongs to a memory (embeddings, relations,
  tags, the inbox, export/import, the extraction log). The method calls its table module
  with ``self.db`` (or with the store where the module writes memories: import, promotion).
- ``module.function(store.db, ...)``: the side tables (`sessions`, `recall`, `browse`,
  `episodes`). ``episodes.prune_episodes(store, ...)`` takes the store: it deletes memories,
  and their vectors go with them.
- ``dream.function(store, ...)``: the dream's book; its steps write memories with their
  tags and vectors, through ``store.db``, ``store.vectors`` and public methods only.

Inside the package imports run one way (no cycle; tests/test_architecture.py): `memories`
imports the table modules, which import `db`, `records`, `tags`, never `memories`
(a TYPE_CHECKING import for annotations excepted).
"""

from __future__ import annotations

from .db import Database, transaction
from .memories import MemoryStore, SchemaBehind
from .records import (
    DEFAULT_CONFIDENCE,
    DEFAULT_EXPORT_LIMIT,
    DUPLICATE_COSINE,
    INBOX_SOURCES,
    MAX_CONTENT_CHARS,
    MAX_ID_LENGTH,
    MAX_TRAVERSAL_DEPTH,
    REINFORCEMENT,
    RELATION_TYPES,
    TARGET_TYPES,
    Memory,
    MemoryFilter,
    content_hash,
    normalize_tags,
    pack_embedding,
    row_to_memory,
    unpack_embedding,
    validate_import_record,
)
from .vectors import (
    BRUTE_FORCE_MAX_ROWS,
    KNN_MAX_ROUNDS,
    KNN_MIN_K,
    KNN_OVERFETCH,
    OWN_SCAN_MAX,
    PREFILTER_THRESHOLD,
    VectorIndex,
)

__all__ = [
    "BRUTE_FORCE_MAX_ROWS",
    "DEFAULT_CONFIDENCE",
    "DEFAULT_EXPORT_LIMIT",
    "DUPLICATE_COSINE",
    "INBOX_SOURCES",
    "KNN_MAX_ROUNDS",
    "KNN_MIN_K",
    "KNN_OVERFETCH",
    "MAX_CONTENT_CHARS",
    "MAX_ID_LENGTH",
    "MAX_TRAVERSAL_DEPTH",
    "OWN_SCAN_MAX",
    "PREFILTER_THRESHOLD",
    "REINFORCEMENT",
    "RELATION_TYPES",
    "TARGET_TYPES",
    "Database",
    "Memory",
    "MemoryFilter",
    "MemoryStore",
    "SchemaBehind",
    "VectorIndex",
    "content_hash",
    "normalize_tags",
    "pack_embedding",
    "row_to_memory",
    "transaction",
    "unpack_embedding",
    "validate_import_record",
]
