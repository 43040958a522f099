"""How the commands print: plain text for people, ``--json`` for programs, ``--markdown``
for notes.

Kept apart from the commands (`llmem_hooks.cli.app`) so what a command does and how its
answer looks can be read, and changed, separately. Everything here only formats what it
is given: no store, no config. Results go to stdout; notes ("No memories.") to stderr, so
a pipe sees only data.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..project import project_label
from ..text.lines import clip
from ..timestamps import for_people

if TYPE_CHECKING:
    from ..model.metrics import EmbeddingMetrics
    from ..search.retriever import SearchHit
    from ..store.citations import StoredCitation

# What click's echo strips when the output is not a terminal (colour and cursor codes).
_ANSI = re.compile(r"\033\[[;?0-9]*[a-zA-Z]")


def echo(message: str = "", err: bool = False, nl: bool = True) -> None:
    """``typer.echo`` without importing typer (the fast read commands, `cli.quick`): the
    line on stdout (stderr with ``err``), flushed; ANSI codes removed unless the stream
    is a terminal, as click does, so both ways print the same bytes."""
    stream = sys.stderr if err else sys.stdout
    if stream is None:
        return
    out = f"{message}\n" if nl else message
    try:
        tty = stream.isatty()
    except Exception:  # a closed or replaced stream
        tty = False
    if out and not tty:
        out = _ANSI.sub("", out)
    if out:
        stream.write(out)
    stream.flush()


class Format(StrEnum):
    plain = "plain"
    json = "json"
    markdown = "markdown"


SHOW_FIELDS = (
    "id",
    "type",
    "confidence",
    "tags",
    "project",
    "entered_by",
    "source",
    "session_id",
    "created_at",
    "updated_at",
    "accessed_at",
    "access_count",
    "expires_at",
    "valid_until",
    "invalidation_reason",
)


# Shown to people in local time with "3 days ago" (`for_people`); --json keeps ISO UTC.
TIME_FIELDS = frozenset({"created_at", "updated_at", "accessed_at", "expires_at", "valid_until"})


def field_text(name: str, value: Any) -> str:
    """One field of ``show`` as a person reads it: times local and relative, confidence
    to two decimals (0.85, not 0.8500000000000001), lists comma-separated."""
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    if name in TIME_FIELDS and isinstance(value, str):
        return for_people(value)
    if name == "confidence" and isinstance(value, float):
        return confidence_text(value)
    return str(value)


def confidence_text(value: float) -> str:
    """0.8500000000000001 -> ``0.85``; 1.0 -> ``1``."""
    return f"{round(value, 2):g}"


def state_mark(mem: Mapping[str, Any], now: str | None = None) -> str:
    """``[forgotten]`` or ``[expired]`` for a memory that is no longer returned (what
    ``list --all`` adds), else ""."""
    from ..timestamps import now_iso

    now = now or now_iso()
    if mem.get("valid_until") and mem["valid_until"] <= now:
        return "[forgotten] "
    if mem.get("expires_at") and mem["expires_at"] <= now:
        return "[expired] "
    return ""


def stale_mark(reason: str | None) -> str:
    """``[stale: <why>] `` for a memory whose cited code changed (docs/citations.md), else
    "": one line, whatever the stored reason holds."""
    return "" if reason is None else f"[stale: {' '.join(reason.split())}] "


def _dumps(value: Any, **kwargs: Any) -> str:
    return json.dumps(value, ensure_ascii=False, **kwargs)


def public(mem: Mapping[str, Any]) -> dict[str, Any]:
    """A memory as ``--json`` shows it: its stored fields, nothing internal."""
    return {k: v for k, v in mem.items() if not k.startswith("_")}


# An episode's bookkeeping: words only search reads, and the question the next exchange
# starts with (docs/episodes.md); never shown.
EPISODE_ONLY_METADATA = ("fts_context", "fts_after", "asks")


def public_hit(hit: SearchHit) -> dict[str, Any]:
    """A search hit as ``search --json`` shows it: the memory, then ``score`` (the final
    reranked score, 4 decimals) and ``match`` (fts, fuzzy or semantic). ``time`` is when
    it was said or stored (an episode's ``created_at`` is the time of its exchange); an
    episode's search-only context words (``metadata.fts_context`` and ``fts_after``) and
    the question it hands to the next exchange (``asks``) are left out. A long content cut
    to the lines that answer the query (``hit.passage``) is shown as ``content`` with
    ``excerpt: true`` and the whole text's length in ``content_chars`` (``show ID`` or
    ``search --full`` gives it whole)."""
    out = public(hit.memory)
    if hit.passage is not None:
        out["content_chars"] = len(out["content"])
        out["content"] = hit.passage
        out["excerpt"] = True
    meta = out.get("metadata")
    if isinstance(meta, Mapping) and any(k in meta for k in EPISODE_ONLY_METADATA):
        out["metadata"] = {k: v for k, v in meta.items() if k not in EPISODE_ONLY_METADATA}
    return {**out, "time": out.get("created_at"), "score": round(hit.score, 4), "match": hit.match}


def memory_line(
    mem: Mapping[str, Any],
    width: int = 100,
    names: Mapping[str, str] | None = None,
    stale: str | None = None,
) -> str:
    """``<id prefix>  <type>  <content, cut>  [tags]  (project)``: one memory per line;
    the project by its name (`project.project_label`), none for a global memory; a
    forgotten or expired one (``list --all``) starts its text with ``[forgotten]`` /
    ``[expired]``, a stale one (``stale``: why) with ``[stale: why]``."""
    text = state_mark(mem) + stale_mark(stale) + clip(mem["content"], width, "…")
    tags = f"  [{', '.join(mem['tags'])}]" if mem.get("tags") else ""
    label = project_label(mem.get("project"), names)
    where = f"  ({label})" if label else ""
    return f"{mem['id'][:8]}  {mem['type']:<14} {text}{tags}{where}"


def named(out: dict[str, Any], names: Mapping[str, str] | None) -> dict[str, Any]:
    """``--json``: the memory with ``project_name`` next to its ``project`` key."""
    if names is not None:
        out["project_name"] = project_label(out.get("project"), names)
    return out


def print_memories(
    memories: Sequence[Mapping[str, Any]],
    fmt: Format,
    empty: str,
    names: Mapping[str, str] | None = None,
) -> None:
    """A list of memories (``list``); ``empty`` goes to stderr when there are none."""
    if fmt is Format.json:
        echo(_dumps([named(public(m), names) for m in memories], indent=1))
        return
    _print_lines(memories, fmt, empty, names)


def print_hits(
    hits: Sequence[SearchHit],
    fmt: Format,
    empty: str,
    names: Mapping[str, str] | None = None,
    full: bool = False,
    stale: Mapping[str, str] | None = None,
) -> None:
    """Search results, best first: as `print_memories`, ``--json`` adds score and match.
    ``full`` (``search --full``): each result's whole text, indented under its line, where
    plain search shows only the line. ``stale``: memory id -> why its cited code no longer
    holds; such a hit is shown marked (``[stale: why]``; ``--json``: ``citation_state``
    "stale" and ``stale_reason``)."""
    stale = stale or {}
    if fmt is Format.json:
        out = [named(public_hit(h), names) for h in hits]
        for item in out:
            if item["id"] in stale:
                item.update(citation_state="stale", stale_reason=stale[item["id"]])
        echo(_dumps(out, indent=1))
        return
    if full and fmt is Format.plain:
        if not hits:
            echo(empty, err=True)
        for i, hit in enumerate(hits):
            line = memory_line(hit.memory, names=names, stale=stale.get(hit.id))
            echo(("\n" if i else "") + line)
            for line in hit.memory["content"].splitlines() or [""]:
                echo(f"    {line}".rstrip())
        return
    _print_lines(
        [h.memory if h.passage is None else {**h.memory, "content": h.passage} for h in hits],
        fmt,
        empty,
        names,
        stale,
    )


def _print_lines(
    memories: Sequence[Mapping[str, Any]],
    fmt: Format,
    empty: str,
    names: Mapping[str, str] | None = None,
    stale: Mapping[str, str] | None = None,
) -> None:
    if not memories:
        echo(empty, err=True)
        return
    stale = stale or {}
    for mem in memories:
        why = stale.get(mem["id"])
        if fmt is Format.markdown:
            tags = f" _(tags: {', '.join(mem['tags'])})_" if mem.get("tags") else ""
            label = project_label(mem.get("project"), names)
            where = f" ({label})" if label else ""
            text = state_mark(mem) + stale_mark(why) + " ".join(mem["content"].split())
            echo(f"- **{mem['type']}** `{mem['id'][:8]}`: {text}{tags}{where}")
        else:
            echo(memory_line(mem, names=names, stale=why))


def print_memory(
    mem: Mapping[str, Any],
    relations: list[dict[str, Any]],
    fmt: Format,
    names: Mapping[str, str] | None = None,
    cites: Sequence[StoredCitation] = (),
) -> None:
    """One memory with every field, its relations and its code citations with their state
    (``show``); the project as ``name (key)``."""
    from ..store.citations import shown

    cited = shown(cites)
    if fmt is Format.json:
        echo(_dumps({**named(public(mem), names), "relations": relations, **cited}, indent=1))
        return
    label = project_label(mem.get("project"), names)
    if label and label != mem["project"]:
        mem = {**mem, "project": f"{label} ({mem['project']})"}
    if fmt is Format.markdown:
        echo(f"### {mem['type']} `{mem['id']}`\n\n{mem['content']}\n")
        for f in SHOW_FIELDS[2:]:
            if mem.get(f) not in (None, [], ""):
                echo(f"- **{f}**: {field_text(f, mem[f])}")
    else:
        for f in SHOW_FIELDS:
            if mem.get(f) not in (None, [], ""):
                echo(f"{f + ':':<21}{field_text(f, mem[f])}")
        if mem.get("summary"):
            echo(f"{'summary:':<21}{mem['summary']}")
        echo(f"\n{mem['content']}")
    for rel in relations:
        echo(f"  {rel['relation_type']}: {rel['source_id'][:8]} -> {rel['target_id']}")
    if cites:  # none: 'not checkable', said in --json only (the text ends with the content)
        echo(f"{'citations:':<21}{cited['citation_state']}")
    for c in cites:
        why = f" ({c.reason})" if c.reason else ""
        echo(f"  {c.spec()}  {c.status}{why}")


def print_pruned(
    gone: Sequence[Mapping[str, Any]], fmt: Format, *, dry_run: bool, backup: Path | None
) -> None:
    """What ``prune`` deleted (or, with ``dry_run``, would delete) and where the backup is."""
    if fmt is Format.json:
        out: dict[str, Any] = {
            "dry_run": dry_run,
            "count": len(gone),
            "ids": [m["id"] for m in gone],
        }
        if backup is not None:
            out["backup"] = str(backup)
        echo(json.dumps(out))
        return
    for mem in gone:
        echo(memory_line(mem))
    verb = "would delete" if dry_run else "deleted"
    kept = f"; backup: {backup}" if backup is not None else ""
    echo(f"{verb} {len(gone)} memor{'y' if len(gone) == 1 else 'ies'}{kept}", err=True)


def print_embedding_metrics(m: EmbeddingMetrics, stored: int, seconds: float, fmt: Format) -> None:
    """``stats --embeddings``: the quality of the stored vectors, with the thresholds."""
    from ..model import metrics

    if fmt is Format.json:
        out = {"embedded_memories": stored, **m.to_dict(), "seconds": round(seconds, 3)}
        echo(json.dumps(out, indent=1))
        return
    if not m.count:
        echo("embeddings: none stored (memories get one when an embed model answers)")
        return
    bullet = "- " if fmt is Format.markdown else "  "
    measured = f"; measured the newest {m.count}" if m.count < stored else ""
    echo(f"embeddings: {stored} memories, {m.dimensions} dimensions{measured}")
    gap = m.discrimination_gap
    lines = [
        f"anisotropy: {m.anisotropy:.3f} (lower is better, warning above "
        f"{metrics.ANISOTROPY_WARNING_THRESHOLD})",
        f"similarity range: {m.similarity_range:.3f} (higher is better, warning below "
        f"{metrics.SIMILARITY_RANGE_WARNING_THRESHOLD})",
        f"discrimination gap: {gap:.3f} across {m.classes} memory types (higher is better)"
        if gap is not None and m.classes > 1
        else "discrimination gap: n/a (one memory type)",
        f"pairs: {m.pairs:,}"
        + (
            f" (similarity range over a sample of {m.sampled_pairs:,}; the means are exact)"
            if m.sampled_pairs is not None
            else ""
        ),
        f"computed in {seconds:.2f} s",
    ]
    for line in lines:
        echo(f"{bullet}{line}")
    for warning in m.warnings:
        echo(f"{'- **warning**' if fmt is Format.markdown else 'warning'}: {warning}")


def print_stats(s: Mapping[str, Any], fmt: Format) -> None:
    """``stats``: counts by type, agent, project and tag; model usage against the caps."""
    if fmt is Format.json:
        echo(json.dumps(s, indent=1))
        return
    bullet = "- " if fmt is Format.markdown else "  "
    echo(f"database: {s['db_path']} ({s['db_size_bytes'] / 1024:.0f} KiB)")
    echo(
        f"memories: {s['active']} active, {s['invalidated']} forgotten, "
        f"{s['expired']} expired, {s['total']} stored; inbox: {s['inbox']}"
    )
    ep = s.get("episodes")
    if ep:
        keep = f"{ep['retention_days']:g} days" if ep["retention_days"] else "forever"
        cap = f"at most {ep['max_count']:,}" if ep["max_count"] else "no cap"
        echo(
            f"episodes: {ep['count']:,} exchange{'' if ep['count'] == 1 else 's'} from"
            f" {ep['sessions']:,} session{'' if ep['sessions'] == 1 else 's'}, "
            f"{ep['text_bytes'] / 1024:.0f} KiB of text ({ep['bytes_per_episode']} B each); "
            f"kept {keep}, {cap}"
        )
        if ep.get("retention_skipped") or ep.get("retention_pruned"):
            echo(
                f"{bullet}retention kept out {ep.get('retention_skipped', 0):,} old exchange(s)"
                f" and deleted {ep.get('retention_pruned', 0):,} episode(s)"
            )
        if ep.get("noise_skipped") or ep.get("summaries_skipped"):
            echo(
                f"{bullet}left out as small talk: {ep.get('noise_skipped', 0):,} exchange(s),"
                f" {ep.get('summaries_skipped', 0):,} session summary(ies)"
            )
    for title, key in (
        ("by type", "by_type"),
        ("by agent", "by_agent"),
        ("by project", "by_project"),
        ("top tags", "by_tag"),
    ):
        if s[key]:
            echo(f"{title}:")
            for name, n in s[key].items():
                if key == "by_project" and name != "(global)":
                    name = project_label(name, s.get("project_names"))
                echo(f"{bullet}{name}: {n}")
    sizes = s.get("sizes")
    if sizes:
        echo(f"size by table ({sizes['method']}):")
        for name, n in sizes["tables"].items():
            echo(f"{bullet}{name}: {n / 1024:,.0f} KiB")
        echo("size by project (rows: text, metadata, vectors):")
        for p in sizes["projects"]:
            echo(
                f"{bullet}{project_label(p['project'], s.get('project_names'))}:"
                f" {p['memories']:,} memories ({p['episodes']:,} episodes),"
                f" {(p['row_bytes'] or 0) / 1024:,.0f} KiB"
            )
    use, caps = s["model_usage"]["today"], s["model_usage"]["caps"]
    echo(f"model usage today ({s['model_usage']['day']} UTC):")
    echo(
        f"{bullet}{use['calls']} calls, {use['tokens']} tokens ({use['prompt_tokens']} prompt"
        f" + {use['output_tokens']} output) of {caps['day_tokens']}, "
        f"{use['seconds']:.1f} s of {caps['day_seconds']:g} s"
    )
    echo(f"{bullet}per session: {caps['session_tokens']} tokens, {caps['session_seconds']:g} s")


def print_status(
    pid: int | None,
    stores: Mapping[str, list[str]],
    rows: Sequence[Mapping[str, Any]],
    fmt: Format,
    service: Mapping[str, Any] | None = None,
) -> None:
    """``status``: whether the sidecar runs, whether its query service answers (``service``:
    its status reply), what it watches, the sessions it has seen."""
    out = {
        "sidecar": {"running": pid is not None, "pid": pid},
        "query_service": {"answers": service is not None, **(service or {})},
        "stores": stores,
        "sessions": list(rows),
    }
    if fmt is Format.json:
        echo(json.dumps(out, indent=1))
        return
    echo(f"sidecar: {'running (pid ' + str(pid) + ')' if pid else 'not running'}")
    echo(
        "query service: "
        + ("answers" if service is not None else "not answering (clients query in-process)")
    )
    for name, paths in stores.items():
        echo(f"watching {name}: {', '.join(paths) or '-'}")
    echo(f"sessions seen: {len(rows)}")
    for r in rows:
        ended = f" ({r['end_reason']})" if r["end_reason"] else ""
        seen = for_people(datetime.fromtimestamp(r["last_activity_ms"] / 1000, UTC).isoformat())
        last = r["last_extraction"]
        last = f", last extraction {for_people(last)}" if last else ""
        echo(f"  {r['session_id']}  {r['agent']:<8} {r['state']}{ended}, active {seen}{last}")
