"""The export file format: a versioned JSON envelope around `MemoryStore.export_all`.

```json
{"format": "llmem-hooks-export", "version": 1, "exported_at": "...", "count": 2,
 "memories": [{"id": "...", "type": "fact", "content": "...", "tags": [...], ...}]}
```
A bare JSON list of memories is accepted on import too (hand-written files).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .errors import ImportFormatError, ValidationError
from .paths import write_private_file
from .timestamps import now_iso

FORMAT = "llmem-hooks-export"
VERSION = 1


def wrap(memories: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": VERSION,
        "exported_at": now_iso(),
        "count": len(memories),
        "memories": list(memories),
    }


def unwrap(data: Any) -> list[Any]:
    """The memories list of an export document; raises ImportFormatError if it is not one."""
    if isinstance(data, list):
        return data
    if not isinstance(data, Mapping):
        raise ImportFormatError("import file must hold a JSON object or list")
    if data.get("format") != FORMAT:
        raise ImportFormatError(f"not an llmem-hooks export (format {data.get('format')!r})")
    if data.get("version") != VERSION:
        raise ImportFormatError(
            f"unsupported export version {data.get('version')!r} (this llmem-hooks reads {VERSION})"
        )
    memories = data.get("memories")
    if not isinstance(memories, list):
        raise ImportFormatError("export file has no 'memories' list")
    return memories


def write_export(path: Path, memories: Sequence[Mapping[str, Any]]) -> None:
    """Write an export file atomically, mode 0600 (memories are private). The folder must
    exist: a typo in a path should not silently create a tree of folders."""
    if not path.parent.is_dir():
        raise ValidationError(f"cannot write {path}: folder {path.parent} does not exist")
    write_private_file(path, json.dumps(wrap(memories), ensure_ascii=False, indent=1) + "\n")


def read_export(path: Path) -> list[Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ImportFormatError(f"cannot read {path}: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ImportFormatError(
            f"{path} is not valid JSON: {exc.msg} at line {exc.lineno}"
        ) from None
    return unwrap(data)
