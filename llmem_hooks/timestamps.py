"""Timestamps: one canonical text form so that SQL string comparison is time comparison.

Every timestamp stored is ISO 8601 in UTC with microseconds and an explicit offset
(``2026-11-22T13:15:00.000000+00:00``). User input (``2026-11-22``,
``2026-11-22T10:00``, ``...Z``, ``...+02:00``) is normalized to that form.
"""

from __future__ import annotations

from datetime import UTC, datetime

from .errors import ValidationError


def now_iso() -> str:
    return to_iso(datetime.now(UTC))


def to_iso(dt: datetime) -> str:
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC).isoformat(timespec="microseconds")


def parse_iso(value: str, *, field: str = "date") -> str:
    """Normalize a user-given ISO 8601 date or date-time; naive values are taken as UTC."""
    if isinstance(value, datetime):
        return to_iso(value)
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"invalid {field}: expected an ISO 8601 date, got {value!r}")
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        raise ValidationError(
            f"invalid {field} {value!r}: expected an ISO 8601 date such as 2026-12-31 "
            "or 2026-12-31T18:00:00Z"
        ) from None
    return to_iso(dt)


def parse_stored(value: str) -> datetime:
    """Parse a timestamp written by `to_iso`."""
    return datetime.fromisoformat(value)


def for_people(value: str | None, now: datetime | None = None, ago: bool = True) -> str:
    """A stored timestamp as a person reads it: local time to the minute (no seconds, no
    microseconds, no offset), with how long ago (or from now) when that is within a month
    (``2026-11-22 14:15 (3 days ago)``). ``--json`` keeps the stored ISO UTC value: this
    is for the eye only; ``ago=False`` for a file kept for later (the dream diary), where
    "3 days ago" would go stale. Text that is not a timestamp is returned as given."""
    if not value:
        return ""
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return value
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    shown = dt.astimezone().strftime("%Y-%m-%d %H:%M")
    since = relative(dt, now) if ago else ""
    return f"{shown} ({since})" if since else shown


def relative(dt: datetime, now: datetime | None = None) -> str:
    """``just now``, ``5 minutes ago``, ``3 days ago``, ``in 2 hours``; "" beyond 30 days
    (the date says it better)."""
    seconds = ((now or datetime.now(UTC)) - dt).total_seconds()
    future, seconds = seconds < 0, abs(seconds)
    if seconds < 60:
        return "just now"
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            n = int(seconds // size)
            if unit == "day" and n > 30:
                return ""
            text = f"{n} {unit}{'' if n == 1 else 's'}"
            return f"in {text}" if future else f"{text} ago"
    return ""
