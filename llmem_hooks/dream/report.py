"""What a dream run leaves for a person: the diary (``dream-diary.md``, appended, one
section per applied run) and the report (``dream-report.html``, the latest run, one
self-contained page: no script, no stylesheet or font from elsewhere).

Every row, wherever it is shown (the terminal, the diary, the report, which the viewer's
dream panel shows), is `row`: the memory's text on one line, its project's name, its
short id and what changed, old -> new; plain text (escaped for HTML in the report, for
Markdown in the diary), so no markup of ours shows literally where it is not rendered.

The diary names every changed memory with its old and new values, up to
`DIARY_LINES_PER_KIND` lines per kind of change and run (a first decay of 100,000
memories would otherwise write 100,000 lines); the ``dream_changes`` table holds every
change in full, and ``llmem-hooks dream --undo RUN`` restores from it (docs/dream.md).
"""

from __future__ import annotations

import html
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..markers import neutralize
from ..paths import FILE_MODE, ensure_private_dir, write_private_file
from ..project import project_label
from ..redact import redact_secrets
from ..text.lines import clip
from ..timestamps import for_people

if TYPE_CHECKING:
    from ..store import MemoryStore
    from .cycle import DreamRun

DIARY_LINES_PER_KIND = 200
REPORT_ROWS_PER_KIND = 50
CLIP = 100
SHORT_ID = 8


def _clip(text: Any, n: int = CLIP) -> str:
    """Someone else's text on one line of ours (a memory's, a project's name): secrets
    redacted (the store already did; the report does not rely on it), our markers defused
    (`markers.neutralize`), control characters (a terminal's escapes) blanked, cut."""
    raw = str(text or "")
    safe = redact_secrets(raw)
    if safe is None:
        return "[REDACTED: a private key]"
    safe = "".join(ch if ch.isprintable() else " " for ch in neutralize(safe))
    return clip(safe, n, "…")


def short_id(mid: Any) -> str:
    """A memory id as a row shows it: a uuid's first 8 characters (``show`` takes any
    unique prefix of at least 4), a shorter id whole."""
    text = _clip(mid, 40)
    return text[:SHORT_ID] if len(text) > 12 else text


def project_of(item: Mapping[str, Any]) -> str:
    """The row's project as people know it (its name, `project.project_label`), or
    "global" for a memory of no project."""
    name = item.get("project_name") or project_label(item.get("project"))
    return _clip(name, 60) if name else "global"


def row(kind: str, item: dict[str, Any]) -> dict[str, str]:
    """One change as the report's columns: ``memory`` (its text, one line, cut),
    ``project`` (its name), ``id`` (short) and ``change`` (what changed, old -> new;
    another memory it names comes with its text). Plain text: no markup of any kind."""
    item = _readable(item)
    mid = item.get("id")
    out = {"memory": _clip(item.get("content")), "project": project_of(item),
           "id": short_id(mid) if mid else "", "change": ""}  # fmt: skip
    if kind == "merged":
        others = "; ".join(
            f'"{_clip(o["content"], 60)}" ({short_id(o["id"])}, {o["by"]} {o["score"]})'
            for o in item["merged"]
        )
        old, new = item["old"], item["new"]
        if item.get("new_content"):
            text = f"; text rewritten by the model -> {_clip(item['new_content'])}"
        else:
            text = f"; model rewrite: {item['rewrite']}" if item.get("rewrite") else ""
        out["change"] = (
            f"kept, merged into it: {others}; confidence {old['confidence']} ->"
            f" {new['confidence']}, tags {_tags(old['tags'])} -> {_tags(new['tags'])},"
            f" recalls {old['access_count']} -> {new['access_count']}{text}"
        )
    elif kind == "retired" and item.get("reason") == "stale":
        out["change"] = (
            f"retired: stale since {item['stale_since']}, {item['citation']} ({item['why']})"
        )
    elif kind == "retired":
        out["change"] = f"retired: expired at {item['expires_at']} (was valid)"
    elif kind == "pruned":
        out.update(memory="", project="", change=f"pruned {item['count']} episode"
                   f"{'' if item['count'] == 1 else 's'} ({item['reason']})")  # fmt: skip
    elif kind == "consolidated":
        where = f"memory {short_id(mid)}" if mid else "a duplicate of a stored memory"
        if not mid and item.get("how"):
            where = "nothing added (a stored memory equals it, or the store refused it)"
            if item.get("planned"):
                where = "a new memory"
        how = f" ({item['how']})" if item.get("how") else ""
        more = len(item.get("inbox_ids") or ()) - 1
        also = f" and {more} more" if more > 0 else ""
        out["change"] = (
            f"inbox {short_id(item['inbox_id'])}{also} (score {item['attention_score']})"
            f" -> {where}{how}"
        )
    elif kind == "evicted":
        why = f", {item['reason']}" if item.get("reason") else ""
        out["id"] = short_id(item["inbox_id"])
        out["change"] = f"evicted from the inbox (score {item['attention_score']}{why})"
    elif kind == "superseded":
        out["change"] = (
            f'superseded by "{_clip(item["by_content"], 80)}" ({short_id(item["by"])});'
            " valid -> retired"
        )
    elif kind in ("boosted", "decayed"):
        uses = f" ({item['uses']} recalls)" if "uses" in item else ""
        out["change"] = f"confidence {item['old']} -> {item['new']}{uses}"
    elif kind == "linked":
        out["change"] = (
            f'related to "{_clip(item.get("target_content"), 80)}"'
            f" ({short_id(item['target'])}, {item['by']} {item['score']})"
        )
    elif kind == "stale":
        out["change"] = f"possibly stale: last confirmed {item['last_confirmed']}"
    else:
        out["change"] = _clip(f"{kind}: {item}", 200)
    return out


def describe(kind: str, item: dict[str, Any]) -> str:
    """One plain line for one change (the terminal, the diary): the memory's text, its
    project and id, then what changed, old -> new."""
    r = row(kind, item)
    if not r["memory"]:
        return r["change"]
    where = ", ".join(x for x in (r["project"], r["id"]) if x)
    return f'"{r["memory"]}" ({where}): {r["change"]}'


def _tags(tags: Any) -> str:
    return "[" + ", ".join(_clip(t, 40) for t in tags or ()) + "]"


def _readable(item: dict[str, Any]) -> dict[str, Any]:
    """``item`` as a person reads it: confidence to two decimals (0.85, not
    0.8500000000000001; also inside a merge's old/new), times in local time to the minute
    (the diary and report are kept, so no "3 days ago")."""
    out = dict(item)
    for key, value in item.items():
        if key in ("old", "new", "confidence") and isinstance(value, float):
            out[key] = f"{round(value, 2):g}"
        elif key in ("old", "new") and isinstance(value, dict):
            out[key] = _readable(value)
        elif key in ("expires_at", "last_confirmed") and isinstance(value, str):
            out[key] = for_people(value, ago=False)
    return out


def diary_section(run: DreamRun) -> str:
    mode = "applied" if run.apply else "dry run"
    lines = [
        f"## Dream {run.run_id} ({mode}, {run.trigger}) at {for_people(run.started_at, ago=False)}",
        "",
    ]
    lines.append(f"Undo: `llmem-hooks dream --undo {run.run_id}`. Took {run.seconds:.2f} s.")
    for result in run.results:
        lines += ["", f"### {result.phase}", ""]
        if not result.counts() and not result.notes and not result.errors:
            lines.append("- nothing to do")
        for kind in result.COUNTED:
            items = getattr(result, kind)
            for item in items[:DIARY_LINES_PER_KIND]:
                lines.append(f"- {_markdown_text(describe(kind, item))}")
            if len(items) > DIARY_LINES_PER_KIND:
                lines.append(
                    f"- ... and {len(items) - DIARY_LINES_PER_KIND} more {kind} (every one,"
                    f" with its old values, is in the dream_changes table of run {run.run_id})"
                )
        for path in result.backups:
            lines.append(f"- backup written before deleting: `{path}`")
        lines += [f"- note: {n}" for n in result.notes]
        lines += [f"- error: {e}" for e in result.errors]
    return "\n".join(lines) + "\n\n"


_MARKDOWN = str.maketrans({c: "\\" + c for c in "\\`*[]<"})


def _markdown_text(line: str) -> str:
    """A row in the diary (Markdown): a memory's backticks, brackets, stars and ``<``
    escaped, so a renderer shows them as typed (no code span, link, emphasis or HTML)."""
    return line.translate(_MARKDOWN)


def append_diary(path: Path, run: DreamRun) -> Path:
    """Append the run's section to the diary (created 0600, never through a symlink)."""
    ensure_private_dir(path.parent)
    new = not path.exists()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, FILE_MODE)
    with os.fdopen(fd, "a", encoding="utf-8") as fh:
        if new:
            fh.write("# llmem-hooks dream diary\n\n")
        fh.write(diary_section(run))
    return path


_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1000px;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;width:100%;margin:.5em 0}
td,th{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f4f4f4}code{font-size:.92em}.n{text-align:right}.err{color:#a00}
"""


def render_report(run: DreamRun, sizes: dict[str, Any] | None = None) -> str:
    """The report page for ``run`` (HTML-escaped throughout)."""
    e = html.escape
    mode = "applied" if run.apply else "dry run"
    out = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>llmem-hooks dream {e(run.run_id)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>Dream {e(run.run_id)}</h1>",
        f"<p>{e(mode)}, {e(run.trigger)}, started {e(for_people(run.started_at, ago=False))}, took"
        f" {run.seconds:.2f} s. Undo with"
        f" <code>llmem-hooks dream --undo {e(run.run_id)}</code>.</p>",
        "<h2>Summary</h2><table><tr><th>phase</th><th>change</th><th class='n'>count</th></tr>",
    ]
    for r in run.results:
        counts = r.counts() or {"nothing to do": 0}
        for kind, n in counts.items():
            out.append(f"<tr><td>{e(r.phase)}</td><td>{e(kind)}</td><td class='n'>{n}</td></tr>")
    out.append("</table>")
    for r in run.results:
        out.append(f"<h2>{e(r.phase)}</h2>")
        if not r.counts() and not r.notes and not r.errors:
            out.append("<p>nothing to do</p>")
        for kind in r.COUNTED:
            items: list[dict[str, Any]] = getattr(r, kind)
            if not items:
                continue
            out.append(f"<p><b>{e(kind)}</b> ({len(items)})</p><table>")
            out.append("<tr><th>memory</th><th>project</th><th>id</th><th>change</th></tr>")
            for item in items[:REPORT_ROWS_PER_KIND]:
                cells = row(kind, item)
                out.append(
                    "<tr>"
                    + "".join(
                        f"<td>{e(cells[k])}</td>" for k in ("memory", "project", "id", "change")
                    )
                    + "</tr>"
                )
            if len(items) > REPORT_ROWS_PER_KIND:
                more = len(items) - REPORT_ROWS_PER_KIND
                out.append(f"<tr><td colspan='4'>… and {more} more</td></tr>")
            out.append("</table>")
        out += [f"<p>backup: <code>{e(b)}</code></p>" for b in r.backups]
        out += [f"<p>{e(n)}</p>" for n in r.notes]
        out += [f"<p class='err'>error: {e(x)}</p>" for x in r.errors]
    if sizes:
        out.append(f"<h2>Store size ({e(sizes['method'])})</h2><table>")
        out.append("<tr><th>table</th><th class='n'>bytes</th></tr>")
        for name, n in sizes["tables"].items():
            out.append(f"<tr><td>{e(name)}</td><td class='n'>{n:,}</td></tr>")
        out.append("</table>")
    out.append("</body></html>\n")
    return "\n".join(out)


def write_report(path: Path, run: DreamRun, store: MemoryStore | None = None) -> Path:
    """Write the report of ``run`` to ``path`` (0600), with the store's table sizes."""
    sizes = None
    if store is not None:
        from ..store.dream import table_sizes

        method, tables = table_sizes(store)
        sizes = {"method": method, "tables": tables}
    ensure_private_dir(path.parent)
    write_private_file(path, render_report(run, sizes))
    return path
