"""Exception hierarchy: every error llmem-hooks raises on purpose derives from LLMemError.

Callers (the CLI, hooks) catch `LLMemError` to turn a failure into one clear line; the
subclasses say whose fault it was, so the CLI can map usage mistakes to exit code 2.
"""

from __future__ import annotations


class LLMemError(Exception):
    """Base class of all llmem-hooks errors."""


class ValidationError(LLMemError, ValueError):
    """Input was rejected (bad type, oversized content, bad date, bad id...)."""


class NotFoundError(LLMemError, KeyError):
    """A memory or inbox item with the given id does not exist."""

    def __str__(self) -> str:  # KeyError quotes its message; we want the plain text.
        return str(self.args[0]) if self.args else "not found"


class ImportFormatError(ValidationError):
    """An export file is malformed or of an unsupported format version."""


class ConfigError(LLMemError, ValueError):
    """config.yaml holds a value that cannot be used; the message names the key."""


class SearchError(LLMemError):
    """A search could not run (e.g. semantic search without an embedder)."""


class SearchTimeout(SearchError):
    """A search ran past its time limit and was stopped (docs/query-service.md)."""


class HubUnavailable(LLMemError):
    """The team hub (PostgreSQL) cannot be reached or went away: the sidecar retries with
    back-off. The message never holds a password."""


class HubDenied(LLMemError):
    """The team hub refused: wrong password, not a member, not a writer or admin of the
    project. Retrying will not help; the message says what to ask for."""
