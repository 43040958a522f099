"""Progress on long work: import, export, the episode backfill, re-embedding, the dream
cycle. A rich bar when stderr is a terminal (a person watches it); plain lines otherwise
(``label: done/total``, at most one a second plus the last), which logs and CI keep.
Work that never reports (nothing to do), or smaller than ``min_total``, prints nothing.

    with progress("importing memories", total=len(items)) as bar:
        for item in items:
            ...
            bar.advance()

Code that reports as it goes takes a plain ``Callable[[int, int], None]`` (done, total):
hand it ``bar.update``, so the store and the coordinator know nothing of terminals.
No thread is started (rich's auto-refresh is off; the bar redraws on update, throttled),
so a bar is safe inside the sidecar and under the tests' leak checks.
"""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import Any, TextIO

PLAIN_EVERY_S = 1.0  # plain lines: at most one per second (and always the last)
REDRAW_EVERY_S = 0.1  # the bar: at most ten redraws per second


def is_terminal(stream: Any) -> bool:
    """True when ``stream`` is an interactive terminal (a closed or odd stream is not)."""
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


class Progress:
    """One piece of long work's progress (a context manager). ``total`` may be unknown
    (None) or learned later through `update`. ``plain`` forces plain lines."""

    def __init__(
        self,
        label: str,
        total: int | None = None,
        *,
        stream: TextIO | None = None,
        plain: bool | None = None,
        min_total: int = 0,
    ) -> None:
        self.label = label
        self.total = total
        self.done = 0
        self.stream: TextIO = sys.stderr if stream is None else stream
        self.plain = not is_terminal(self.stream) if plain is None else plain
        self._shown_at = -1.0e9
        self._shown_done: int | None = None
        self._bar: Any = None
        self._task: Any = None
        self._updated = False  # nothing is shown for work that never reported
        self.min_total = min_total  # ... nor for work this small (a 3-memory export)

    # -- context manager ------------------------------------------------------------------
    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close(show_last=exc_type is None)

    def _start_bar(self) -> None:
        try:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
            from rich.progress import Progress as RichProgress
        except ImportError:  # pragma: no cover - rich is a dependency; plain lines then
            self.plain = True
            return
        console = Console(file=self.stream, force_terminal=True)
        self._bar = RichProgress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            auto_refresh=False,  # no refresh thread: we redraw on update
            transient=False,
        )
        self._bar.start()
        self._task = self._bar.add_task(self.label, total=self.total)

    # -- reporting ------------------------------------------------------------------------
    def update(self, done: int, total: int | None = None) -> None:
        """``done`` items of ``total`` (None keeps the total known so far)."""
        self.done = done
        if total is not None:
            self.total = total
        if self.total is not None and self.total < self.min_total:
            return
        if not self._updated:
            self._updated = True
            if not self.plain:
                self._start_bar()  # lazily: work that turns out empty draws nothing
        self._show(final=False)

    def advance(self, n: int = 1) -> None:
        self.update(self.done + n)

    def close(self, show_last: bool = True) -> None:
        """Show where the work ended (once) and release the terminal."""
        if show_last and self._updated:
            self._show(final=True)
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def _show(self, final: bool) -> None:
        now = time.monotonic()
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, total=self.total)
            if final or now - self._shown_at >= REDRAW_EVERY_S:
                self._shown_at = now
                self._bar.refresh()
            return
        finished = self.total is not None and self.done >= self.total
        if self._shown_done == self.done and (final or finished):
            return  # the last line is already out
        if final or finished or now - self._shown_at >= PLAIN_EVERY_S:
            self._shown_at = now
            self._shown_done = self.done
            of = f"/{self.total}" if self.total is not None else ""
            print(f"{self.label}: {self.done}{of}", file=self.stream, flush=True)


def progress(
    label: str, total: int | None = None, *, stream: TextIO | None = None, min_total: int = 0
) -> Progress:
    """A `Progress` for ``label`` on ``stream`` (stderr): the bar on a terminal, plain
    lines otherwise. Use it as a context manager."""
    return Progress(label, total, stream=stream, min_total=min_total)
