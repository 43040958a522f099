"""The everyday read commands without typer: ``search``, ``list``, ``stats`` and ``--version``.

typer (with the pydantic it now builds every option's coercion on) costs ~0.3 s before a
command starts, ten times a bare interpreter; these commands are what a person (or an
agent through a shell) runs most. `main` parses the plain, well-formed forms of them
itself and runs the same code the typer commands run (`run_search`, `run_list`,
`run_stats`, shared with `llmem_hooks.cli.app`); anything else (``--help``, an unknown or
malformed option, a value out of range) returns None and typer answers, so every error
and help text stays typer's own. tests/cli/test_cli_reads.py runs each form both ways and
compares output and exit code.

Also here, because both ways need them: `Invocation`, one run's state (``--db``, the
format, the config and database the commands open; made per run and passed to each
command, never a module-level global), and how an error maps to an exit code.
Read commands create nothing: no LLMEM_HOME, no config.yaml, no database; a missing
database is ``error: no database at PATH`` and exit 1 (docs/cli.md).
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, LLMemError, NotFoundError, SearchError, ValidationError
from .render import Format, echo

if TYPE_CHECKING:
    from ..config import Config
    from ..model.backoff import ModelFailure
    from ..model.embed import EmbeddingEngine
    from ..search.retriever import Retriever
    from ..store import MemoryStore

EXIT_USAGE = 2
EXIT_NOT_FOUND = 1  # a database (or LLMEM_HOME) that does not exist


class MissingDatabase(LLMemError):
    """A read command named a database that does not exist (exit 1; nothing is created)."""


class ModelState:
    """Why the embedding model was not used in this command (None: it was, or it is off)."""

    def __init__(self) -> None:
        self.configured = True
        self.failure: ModelFailure | None = None
        self.retry_in: float | None = None  # set when an earlier command's failure applied
        self.other: str | None = None  # any other failure (wrong model, bad answer...)

    def cause(self) -> str:
        """The real cause, for messages: not configured vs. not reachable vs. timeout."""
        if not self.configured:
            return "no embedding model is configured (ollama.enabled is false)"
        if self.failure is not None:
            return self.failure.cause()
        return self.other or "the embedding model did not answer"

    def retry_note(self) -> str:
        from ..model.backoff import BACKOFF_SECONDS

        if self.failure is None:
            return ""
        if self.retry_in is None:
            return f"; retrying after {BACKOFF_SECONDS:.0f} s"
        ago = max(0.0, time.time() - self.failure.at)
        return f" ({ago:.0f} s ago); retrying in {self.retry_in:.0f} s"


class Invocation:
    """One run of the CLI: the options given before the command (``--db``, the format),
    config.yaml as read for it, and why the model was not used (`model`). `main` makes
    one per run, either way (typer hands it to each command as its context's ``obj``):
    nothing outlives the run or is shared between runs."""

    def __init__(self, db: Path | None = None, fmt: Format = Format.plain) -> None:
        self.db = db
        self.fmt = fmt
        self.model = ModelState()
        self._config: Config | None = None

    @staticmethod
    def of(ctx: Any) -> Invocation:
        """The invocation of a typer command's context (a new one if the app was run
        without `llmem_hooks.cli.app.main`)."""
        found: Invocation = ctx.ensure_object(Invocation)
        return found

    def fmt_for(self, as_json: bool, as_markdown: bool) -> Format:
        """A command's own ``--json`` / ``--markdown``, else the one given before it."""
        if as_json and as_markdown:
            raise ValidationError("--json and --markdown cannot be combined")
        if as_json:
            return Format.json
        if as_markdown:
            return Format.markdown
        return self.fmt

    def config(self, create: bool = True) -> Config:
        """config.yaml, read once per invocation. ``create=False`` (read commands): a
        missing file gives the defaults and writes nothing (no LLMEM_HOME, no
        config.yaml)."""
        if self._config is None:
            from ..config import load_settings

            self._config = load_settings(create=create)
        return self._config

    def db_path(self) -> Path:
        """--db (relative to the current directory), else config.yaml's memory.db_path
        (validated and made absolute by `load_config`), else ``<LLMEM_HOME>/memory.db``."""
        from ..paths import check_user_path, get_db_path

        if self.db is not None:
            return check_user_path(self.db.absolute(), "file", "--db")
        configured = self.config().memory.db_path
        return Path(configured) if configured else get_db_path()

    def config_for_db(self) -> Config:
        """The config with ``memory.db_path`` set to --db when one is given (for what
        opens the store itself: the sidecar, an in-process query service)."""
        config = self.config()
        if self.db is None:
            return config
        from dataclasses import replace

        return replace(config, memory=replace(config.memory, db_path=str(self.db_path())))

    @contextmanager
    def open_store(self, read_only: bool = False) -> Iterator[MemoryStore]:
        """The store named by --db / config / default, closed afterwards. ``read_only``
        (the commands that only read): the database is opened read-only, so they work on
        a file the user cannot write and change nothing in it; a missing one is
        `MissingDatabase` (nothing is created: no folder, no file, no config.yaml)."""
        from ..store import MemoryStore, SchemaBehind

        cfg = self.config(create=not read_only)
        path = self.db_path()
        if read_only:
            try:
                os.stat(path)  # a dangling symlink is missing too; a folder we may not read
            except (FileNotFoundError, NotADirectoryError):  # is the store's own error
                raise MissingDatabase(f"no database at {path}") from None
            except OSError:
                pass
        try:
            store = MemoryStore.from_config(cfg, path, read_only=read_only)
        except SchemaBehind:
            if not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)):
                raise
            # An older database we may write (first use after an upgrade): migrate it, as
            # any writing command would, rather than refuse to read it.
            echo(f"note: upgrading the schema of {path}", err=True)
            store = MemoryStore.from_config(cfg, path)
        try:
            yield store
        finally:
            store.close()

    def local_embedding(self, text: str) -> tuple[EmbeddingEngine | None, list[float] | None]:
        """(engine, vector of ``text``) when a local embedder is enabled and answers; else
        (None, None) and `model` says why. Interactive: at most ~2 s for the model, and a
        server that failed in the last minute (any process) is skipped at once (without
        loading the HTTP client). The caller closes the engine."""
        from ..model.embed import ModelBackedOff, embedder_from_config

        engine = embedder_from_config(self.config(), interactive=True)
        if engine is None:
            self.model.configured = False
            return None, None
        try:
            return engine, engine.embed(text)
        except ModelBackedOff as exc:
            self.model.failure, self.model.retry_in = exc.failure, exc.retry_in
        except Exception as exc:  # not running, no model, wrong size...
            self.model.failure = engine.last_failure
            self.model.other = str(exc)
            logging.getLogger(__name__).debug("no embedding: %s", exc)
        engine.close()
        return None, None

    def keyword_only_note(self, command: str, explicit: bool) -> None:
        """Say once on stderr why this command runs without the model. A server that
        hangs (timeout) is always worth a line; 'nothing listens' is the normal no-Ollama
        setup, said only when the user asked for the model (--mode hybrid)."""
        failure = self.model.failure
        if failure is None and not explicit:
            return
        if failure is not None and failure.kind == "down" and not explicit:
            return
        echo(f"{command}: {self.model.cause()}{self.model.retry_note()}", err=True)

    def retriever(self, store: MemoryStore, probe: str | None = None) -> Retriever:
        """The configured Retriever. With ``probe`` (the query), also the embedding
        engine if one answers for ``probe`` (its vector is cached, so the search does not
        ask again)."""
        from ..search.retriever import Retriever

        embedder = self.local_embedding(probe)[0] if probe is not None else None
        return Retriever.from_settings(store, self.config().retrieval, embedder)


# -- the commands' bodies (typer's commands in app.py call these too) ------------------------
def run_search(
    inv: Invocation,
    query: str,
    *,
    tags: str | None = None,
    any_tag: str | None = None,
    after: str | None = None,
    before: str | None = None,
    entered_by: str | None = None,
    type: str | None = None,
    project: str | None = None,
    limit: int | None = None,
    offset: int = 0,
    fuzzy: bool | None = None,
    threshold: float | None = None,
    mode: str | None = None,
    full: bool = False,
    fmt: Format = Format.plain,
    team: Callable[[Invocation, str, str | None, int], list[Any]] | None = None,
) -> None:
    """`search`: best match first. The model is asked only when it can help: not for
    ``--mode fts``, and, without ``--mode``, not when the store holds no vector (keyword
    search then, with no HTTP client built at all)."""
    from ..search.retriever import SEARCH_MODES, attach_passages
    from ..store import MemoryFilter
    from .render import print_hits

    if mode is not None and mode not in SEARCH_MODES:
        raise ValidationError(f"invalid --mode {mode!r} (use {', '.join(SEARCH_MODES)})")
    from ..store import citation_review
    from ..store import projects as project_names

    with inv.open_store(read_only=True) as st:
        if project is not None:
            project = project_names.resolve(st.db, project)
        names = project_names.display_names(st.db)
        # No vector in the index: nothing for the model to match, so no probe (an index
        # that cannot load, sqlite-vec missing, still asks: Python scans the vectors).
        no_vectors = st.vectors.loaded and st.vectors.count() == 0
        keywords_only = mode == "fts" or (mode is None and no_vectors)
        retriever = inv.retriever(st, probe=None if keywords_only else query)
        search_mode = mode or "hybrid"
        if search_mode != "fts" and retriever.embedder is None:
            if search_mode == "semantic":
                raise SearchError(f"semantic search needs an embedder: {inv.model.cause()}")
            inv.keyword_only_note("search: keyword-only", explicit=mode == "hybrid")
        flt = MemoryFilter(
            type=type,
            tags_all=tags or (),
            tags_any=any_tag or (),
            after=after,
            before=before,
            entered_by=entered_by,
            project=project,
        )
        kwargs: dict[str, Any] = {
            "limit": limit or inv.config().retrieval.limit,
            "offset": offset,
            "fuzzy": fuzzy,
            "threshold": threshold,
        }
        try:
            if search_mode == "semantic":
                hits = retriever.find(query, flt, search_mode="semantic", **kwargs)
            else:  # hybrid if the model answered the probe above, else keywords
                hits = retriever.find_hybrid_or_keywords(query, flt, **kwargs)[0]
        finally:
            close = getattr(retriever.embedder, "close", None)
            if close is not None:
                close()
        if team is not None:  # `search --team`: the hub's answers fused with these
            from ..store import team as team_links
            from ..team.search import fuse

            held = team_links.hub_ids(st.db, [h.id for h in hits])
            remote = team(inv, query, project, kwargs["limit"])
            hits = fuse(hits, remote, kwargs["limit"], held)
        stale = citation_review.stale_reasons(st.db, [h.id for h in hits])
    if not full:
        attach_passages(hits, query, inv.config().retrieval.passage_chars)
    print_hits(hits, fmt, "No memories found.", names, full=full, stale=stale)


def run_list(
    inv: Invocation,
    *,
    sort: str = "created",
    order: str = "desc",
    limit: int = 20,
    offset: int = 0,
    type: str | None = None,
    tags: str | None = None,
    project: str | None = None,
    entered_by: str | None = None,
    include_invalid: bool = False,
    fmt: Format = Format.plain,
) -> None:
    """`list`: memories, newest first by default."""
    from ..store import projects as project_names
    from .render import print_memories

    with inv.open_store(read_only=True) as st:
        if project is not None:
            project = project_names.resolve(st.db, project)
        names = project_names.display_names(st.db)
        rows = st.list_all(
            type=type,
            valid_only=not include_invalid,
            limit=limit,
            offset=offset,
            sort=sort,
            order=order,
            tags_all=(tags or "").split(",") if tags else (),
            project=project,
            entered_by=entered_by,
            include_expired=include_invalid,
        )
    print_memories(rows, fmt, "No memories.", names)


def store_sizes(store: Any) -> dict[str, Any]:
    """``stats``: bytes per table (dbstat, else an estimate) and per project."""
    from ..store.dream import project_sizes, table_sizes

    method, tables = table_sizes(store)
    return {"method": method, "tables": tables, "projects": project_sizes(store)}


def run_stats(inv: Invocation, fmt: Format = Format.plain, embeddings: bool = False) -> None:
    """`stats`: counts, episodes, model usage, sizes; ``embeddings``: vector quality."""
    from .render import print_embedding_metrics, print_stats

    if embeddings:
        from ..model.metrics import METRICS_MAX_EMBEDDINGS, metrics_from_rows

        started = time.monotonic()
        with inv.open_store(read_only=True) as st:
            stored = st.count_embeddings()
            rows = st.get_embeddings_with_types(limit=METRICS_MAX_EMBEDDINGS)
        m = metrics_from_rows(rows)
        print_embedding_metrics(m, stored, time.monotonic() - started, fmt)
        return
    from ..model.budget import BudgetLimits, ModelBudget
    from ..store import projects as project_names
    from ..store.episodes import episode_stats

    with inv.open_store(read_only=True) as st:
        s = st.stats()
        s["project_names"] = project_names.display_names(st.db)
        limits = inv.config().episodes
        s["episodes"] = {
            **episode_stats(st.db),
            "retention_days": limits.retention_days,
            "max_count": limits.max_count,
        }
        s["model_usage"] = ModelBudget(st, BudgetLimits.from_config(inv.config())).report()
        s["sizes"] = store_sizes(st)
    print_stats(s, fmt)


def exit_code_for(exc: BaseException) -> int | None:
    """Print ``exc`` as one ``error:`` line and return the exit code; None for an
    exception that is a bug (the caller re-raises it)."""
    if isinstance(exc, (ValidationError, NotFoundError, ConfigError)):
        echo(f"error: {exc}", err=True)
        return EXIT_USAGE
    if isinstance(exc, (LLMemError, OSError)):
        echo(f"error: {exc}", err=True)
        return 1
    if type(exc).__name__ in ("DatabaseError", "OperationalError", "IntegrityError"):
        echo(f"error: database: {exc}", err=True)  # a damaged or foreign database file
        return 1
    return None


def begin() -> None:
    """What every invocation starts with, both ways: logging to stderr."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")


# -- the parser for the plain forms ----------------------------------------------------------
class _Fallback(Exception):
    """Not a form this parser takes on: typer answers instead."""


_INT = re.compile(r"(0|[1-9][0-9]{0,8})")
_UNIT = re.compile(r"(0|1)(\.[0-9]{1,9})?|\.[0-9]{1,9}")


def _int(lo: int, hi: int | None) -> Callable[[str], int]:
    def convert(text: str) -> int:
        if not _INT.fullmatch(text) or int(text) < lo or (hi is not None and int(text) > hi):
            raise _Fallback
        return int(text)

    return convert


def _unit(text: str) -> float:
    if not _UNIT.fullmatch(text) or float(text) > 1.0:
        raise _Fallback
    return float(text)


def _choice(*values: str) -> Callable[[str], str]:
    def convert(text: str) -> str:
        if text not in values:
            raise _Fallback
        return text

    return convert


def _text(text: str) -> str:
    return text


# Option name -> (keyword, converter), or (keyword, constant) for a flag.
_Spec = dict[str, tuple[str, Any, bool]]  # name -> (keyword, converter or value, takes value)


def _opt(kw: str, conv: Any = _text) -> tuple[str, Any, bool]:
    return (kw, conv, True)


def _flag(kw: str, value: Any = True) -> tuple[str, Any, bool]:
    return (kw, value, False)


_FORMAT: _Spec = {"--json": _flag("as_json"), "--markdown": _flag("as_markdown")}
_SEARCH: _Spec = {
    **_FORMAT,
    "--tags": _opt("tags"),
    "--any-tag": _opt("any_tag"),
    "--after": _opt("after"),
    "--before": _opt("before"),
    "--entered-by": _opt("entered_by"),
    "--type": _opt("type"),
    "-t": _opt("type"),
    "--project": _opt("project"),
    "--limit": _opt("limit", _int(1, 1000)),
    "-n": _opt("limit", _int(1, 1000)),
    "--offset": _opt("offset", _int(0, None)),
    "--fuzzy": _flag("fuzzy", True),
    "--no-fuzzy": _flag("fuzzy", False),
    "--threshold": _opt("threshold", _unit),
    "--mode": _opt("mode"),
    "--full": _flag("full"),
}
_SORTS = ("created", "updated", "accessed", "expires", "confidence", "content", "type")
_LIST: _Spec = {
    **_FORMAT,
    "--sort": _opt("sort", _choice(*_SORTS)),
    "--order": _opt("order", _choice("asc", "desc")),
    "--limit": _opt("limit", _int(1, 100_000)),
    "-n": _opt("limit", _int(1, 100_000)),
    "--offset": _opt("offset", _int(0, None)),
    "--type": _opt("type"),
    "-t": _opt("type"),
    "--tags": _opt("tags"),
    "--project": _opt("project"),
    "--entered-by": _opt("entered_by"),
    "--all": _flag("include_invalid"),
}
_STATS: _Spec = {**_FORMAT, "--embeddings": _flag("embeddings")}
_COMMANDS: dict[str, tuple[_Spec, int]] = {"search": (_SEARCH, 1), "list": (_LIST, 0)}
_COMMANDS["stats"] = (_STATS, 0)


def _parse(args: Sequence[str], spec: _Spec) -> tuple[dict[str, Any], list[str]]:
    """Options (last one wins, as click does) and positionals, in any order; anything
    unusual (``--``, a value that looks like an option, an unknown or glued option)
    falls back to typer."""
    opts: dict[str, Any] = {}
    positional: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if not arg.startswith("-") or arg == "-":
            positional.append(arg)
            continue
        name, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        if name not in spec:
            raise _Fallback
        kw, conv, takes_value = spec[name]
        if not takes_value:
            if eq:
                raise _Fallback
            opts[kw] = conv
            continue
        if not eq:
            if i >= len(args):
                raise _Fallback
            value = args[i]
            i += 1
        if value.startswith("-"):
            raise _Fallback
        opts[kw] = conv(value)
    return opts, positional


def _root(args: list[str]) -> tuple[Path | None, bool, bool, list[str]]:
    """``--db``, ``--json``, ``--markdown`` before the command; the rest."""
    db: str | None = None
    as_json = as_markdown = False
    while args and args[0].startswith("-"):
        arg = args.pop(0)
        if arg == "--json":
            as_json = True
        elif arg == "--markdown":
            as_markdown = True
        elif arg == "--db" and args:
            db = args.pop(0)
        elif arg.startswith("--db="):
            db = arg[len("--db=") :]
        else:
            raise _Fallback
    if db is None and "LLMEM_DB" in os.environ:
        db = os.environ["LLMEM_DB"]
    if db is not None and (not db or db.startswith("-") or os.path.isdir(db)):
        raise _Fallback  # typer's own message for a folder or an empty name
    if as_json and as_markdown:
        raise _Fallback
    return (Path(db) if db is not None else None), as_json, as_markdown, args


def main(argv: Sequence[str]) -> int | None:
    """Run a plain ``search`` / ``list`` / ``stats`` / ``--version``; None: not one of
    those (or not plain): the caller hands ``argv`` to typer."""
    if list(argv) == ["--version"]:
        from .. import __version__

        echo(__version__)
        return 0
    try:
        db, as_json, as_markdown, rest = _root(list(argv))
        if not rest or rest[0] not in _COMMANDS:
            return None
        spec, npos = _COMMANDS[rest[0]]
        opts, positional = _parse(rest[1:], spec)
    except _Fallback:
        return None
    if len(positional) != npos:
        return None
    begin()
    inv = Invocation(
        db, Format.json if as_json else Format.markdown if as_markdown else Format.plain
    )
    try:
        fmt = inv.fmt_for(opts.pop("as_json", False), opts.pop("as_markdown", False))
        if rest[0] == "search":
            run_search(inv, positional[0], fmt=fmt, **opts)
        elif rest[0] == "list":
            run_list(inv, fmt=fmt, **opts)
        else:
            run_stats(inv, fmt, **opts)
    except Exception as exc:
        code = exit_code_for(exc)
        if code is None:
            raise
        return code
    return 0


__all__ = [
    "EXIT_NOT_FOUND",
    "EXIT_USAGE",
    "Invocation",
    "MissingDatabase",
    "ModelState",
    "main",
    "run_list",
    "run_search",
    "run_stats",
]
