"""Caps on what the local model may cost: tokens and seconds, per session and per UTC day.

A model that extracts at every idle event of every session can keep a laptop's GPU busy
all day, so each call is checked first and recorded afterwards in the memory database
(table ``model_usage``, one row per UTC day and session key such as
``opencode:ses_123``); the caps therefore hold across hook calls, processes and sidecar
restarts. Past a day cap the model is skipped until the next UTC day; past a session cap,
for the rest of that session (its usage is summed over all days). A cap of 0 means no
model use at all.

Tokens are prompt plus output tokens as Ollama reports them (``prompt_eval_count`` and
``eval_count``); when it reports none they are estimated as characters / 4.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from ..config import BudgetSettings, Config, section_of
from ..errors import LLMemError
from ..store import MemoryStore, sessions

CHARS_PER_TOKEN = 4
MIN_CALL_SECONDS = 0.1  # less time left than this: a request could only time out


class BudgetExceeded(LLMemError):
    """A session or day cap is reached: the model is not asked."""


def estimate_tokens(text: str) -> int:
    """Tokens of ``text`` by the usual rule of thumb (4 characters each), rounded up."""
    return math.ceil(len(text) / CHARS_PER_TOKEN) if text else 0


def utc_day(epoch_seconds: float) -> str:
    """The UTC calendar day (``YYYY-MM-DD``) a moment falls on: the unit of day caps."""
    return datetime.fromtimestamp(epoch_seconds, UTC).date().isoformat()


@dataclass(frozen=True)
class BudgetLimits(BudgetSettings):
    """The ``budget`` config section (`llmem_hooks.config.BudgetSettings` holds the
    fields and their defaults)."""

    @classmethod
    def from_config(
        cls, config: Config | BudgetSettings | Mapping[str, Any] | None
    ) -> BudgetLimits:
        """The limits of the whole config, or of its ``budget`` section alone."""
        return cls(**section_of(config, BudgetSettings).to_dict())


@dataclass(frozen=True)
class Usage:
    """What model calls cost, summed."""

    calls: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.output_tokens


@dataclass(frozen=True)
class BudgetCheck:
    """The answer to "may the model be called now?"; ``seconds_left`` bounds the request
    timeout, so a slow answer cannot overrun the budget."""

    allowed: bool
    reason: str
    tokens_left: int
    seconds_left: float


class ModelBudget:
    """Checks and records model usage against the caps, in the memory database.

    ``clock`` (epoch seconds) decides which UTC day it is; tests inject their own.
    """

    def __init__(
        self,
        store: MemoryStore,
        limits: BudgetLimits | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.limits = limits or BudgetLimits()
        self.clock = clock

    def today(self) -> str:
        return utc_day(self.clock())

    def day_usage(self, day: str | None = None) -> Usage:
        """All sessions' usage on ``day`` (default: today, UTC)."""
        return Usage(*sessions.usage_totals(self.store.db, day=day or self.today()))

    def session_usage(self, session_key: str) -> Usage:
        """One session's usage over all days."""
        return Usage(*sessions.usage_totals(self.store.db, session_key=session_key))

    def check(self, session_key: str, need_tokens: int = 0) -> BudgetCheck:
        """Whether a call of about ``need_tokens`` prompt tokens fits under every cap."""
        lim = self.limits
        day = self.day_usage()
        sess = self.session_usage(session_key)
        tokens_left = min(lim.session_tokens - sess.tokens, lim.day_tokens - day.tokens)
        seconds_left = min(lim.session_seconds - sess.seconds, lim.day_seconds - day.seconds)
        need = f", this call needs ~{need_tokens}" if need_tokens else ""
        reason = ""
        if day.tokens + need_tokens > lim.day_tokens or day.tokens >= lim.day_tokens:
            reason = f"day token cap ({day.tokens} of {lim.day_tokens} used today{need})"
        elif day.seconds + MIN_CALL_SECONDS > lim.day_seconds:
            reason = f"day time cap ({day.seconds:.1f} of {lim.day_seconds:g} s used today)"
        elif sess.tokens + need_tokens > lim.session_tokens or sess.tokens >= lim.session_tokens:
            reason = f"session token cap ({sess.tokens} of {lim.session_tokens} used{need})"
        elif sess.seconds + MIN_CALL_SECONDS > lim.session_seconds:
            reason = f"session time cap ({sess.seconds:.1f} of {lim.session_seconds:g} s used)"
        return BudgetCheck(
            not reason, reason, max(0, tokens_left), max(0.0, round(seconds_left, 3))
        )

    def record(
        self,
        session_key: str,
        *,
        prompt_tokens: int,
        output_tokens: int,
        seconds: float,
        calls: int = 1,
    ) -> None:
        """Add one call's cost to today's row for the session."""
        sessions.add_usage(
            self.store.db,
            self.today(),
            session_key,
            calls=max(0, calls),
            prompt_tokens=max(0, int(prompt_tokens)),
            output_tokens=max(0, int(output_tokens)),
            seconds=max(0.0, float(seconds)),
        )

    def report(self) -> dict[str, Any]:
        """Today's usage, the caps and what is left of the day's: for ``stats`` and
        ``doctor``."""
        day = self.day_usage()
        used_by = sessions.usage_sessions(self.store.db, self.today())
        lim = self.limits
        return {
            "day": self.today(),
            "today": {**asdict(day), "tokens": day.tokens, "seconds": round(day.seconds, 3)},
            "sessions_today": used_by,
            "caps": asdict(lim),
            "day_tokens_left": max(0, lim.day_tokens - day.tokens),
            "day_seconds_left": round(max(0.0, lim.day_seconds - day.seconds), 3),
        }
