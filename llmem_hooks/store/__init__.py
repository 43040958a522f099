"""The store: every table of the memory database, and the only package that runs SQL.

``from llmem_hooks.store import MemoryStore`` is the public door. Who owns which table:

- `memories`  MemoryStore: ``memories``, ``tags``, ``memory_tags``, ``memories_fts``
- `vocabulary` ``fuzzy_terms``, ``fuzzy_trigrams`` (the typo-tolerance index)
- `vectors`   the sqlite-vec tables and the filtered nearest-neighbour planner
- `relations` ``relations``;  `inbox` ``inbox``;  `archive` export / import files
- `sessions`  ``sessions``, ``extraction_log`` (adapter cursors), ``pending_hooks``,
  ``model_usage`` (was ``llmem_hooks.session_state``; imported as a module of functions)
- `records`   validators, `Memory`, `MemoryFilter`, row -> `Memory`, embedding packing
- `db`        connections, transactions;  `migrations` the schema, one named step each
"""

from __future__ import annotations

from .db import transaction
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
