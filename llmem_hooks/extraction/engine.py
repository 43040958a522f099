"""`ExtractionEngine`: what the session hooks call to turn new messages into memory
candidates and a finished session into a self-assessment.

The heuristics always run; a model `Extractor` (`llm.OllamaExtractor`) adds its
candidates when it can, and everything passes `finalize_candidates`; `extract_staged` also
hands over the candidates not sure enough to keep, for the inbox. A model that cannot
run never costs the result: the engine falls back and records why in ``last_run``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ..errors import LLMemError
from ..events import Message
from .candidates import (
    Assessment,
    Assessor,
    Candidate,
    Extraction,
    Extractor,
    ReportsStatus,
    extract_staged,
    finalize_candidates,
    split_candidates,
)
from .heuristics import HeuristicExtractor
from .summary import self_assessment

log = logging.getLogger(__name__)


class ExtractionEngine:
    """What the session hooks call to turn new messages into memory candidates; an
    `Extractor` and a `SessionAssessor`.

    The heuristics always run; a model extractor (e.g. `llm.OllamaExtractor`), when
    given, runs too and its candidates are added to theirs, so explicit "remember that
    ..." notes survive a model that misses them. If the model cannot run (no server,
    timeout, missing model, budget spent) the heuristics' candidates are the result.
    Every result passes `finalize_candidates`.

    ``last_run`` says which extractor produced the last result and why: ``"ollama: ..."``
    or ``"heuristic: <reason>"``; ``last_assessment`` the same for `assess_session`.
    """

    def __init__(self, extractor: Extractor | None = None, *, reason: str | None = None) -> None:
        self.heuristic = HeuristicExtractor()
        self.extractor: Extractor = extractor or self.heuristic
        self.reason = reason or ("no model configured" if extractor is None else "")
        self.last_run = ""
        self.last_assessment = ""

    @property
    def uses_model(self) -> bool:
        return self.extractor is not self.heuristic

    def check_available(self) -> bool:
        """Whether extraction can run (the heuristics always can)."""
        return True

    def extract(
        self, messages: Sequence[Message], *, project: str | None = None
    ) -> list[Candidate]:
        """The candidates sure enough to become memories."""
        return self.extract_staged(messages, project=project).memories

    def extract_staged(
        self, messages: Sequence[Message], *, project: str | None = None
    ) -> Extraction:
        """The candidates to keep and, apart, the ones not sure enough (for the inbox)."""
        found = self.heuristic.extract_staged(messages, project=project)
        if not self.uses_model:
            self.last_run = f"heuristic: {self.reason}"
            return found
        try:
            model = extract_staged(self.extractor, messages, project=project)
        except Exception as exc:
            self.last_run = f"heuristic: {_reason(exc)}"
            log.info("extraction fell back to the heuristics: %s", _reason(exc))
            return found
        self.last_run = _status(self.extractor)
        # the sure ones first: a statement both proposed keeps the highest confidence
        both = [*found.memories, *model.memories, *found.inbox, *model.inbox]
        return split_candidates(finalize_candidates(both))

    def assess_session(
        self, messages: Sequence[Message], *, session_key: str | None = None
    ) -> Assessment | None:
        """The session-end self-assessment: the model's when the extractor is an
        `Assessor`, else the plain-text counts of `self_assessment`; None for an empty
        session."""
        if not messages:
            return None
        reason = self.reason
        if self.uses_model and isinstance(self.extractor, Assessor):
            try:
                result = self.extractor.assess(messages, session_key=session_key)
                self.last_assessment = result.assessed_by
                return result
            except Exception as exc:
                reason = _reason(exc)
                log.info("self-assessment without the model: %s", reason)
        elif self.uses_model:
            reason = "the extractor cannot assess sessions"
        self.last_assessment = f"heuristic: {reason}"
        text = self_assessment(messages)
        return Assessment(text, ["self-assessment"], {}, self.last_assessment) if text else None


def _status(extractor: Extractor) -> str:
    """What ``last_run`` shows after a model extractor ran: its own status line, else its
    name; the class name of an extractor that does not report (`ReportsStatus`)."""
    if isinstance(extractor, ReportsStatus):
        return extractor.last_status or extractor.name
    return type(extractor).__name__


def _reason(exc: BaseException) -> str:
    """An exception as one short line for ``last_run`` and logs (our errors carry their
    own wording; anything else is named by its type)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if isinstance(exc, LLMemError) and text:
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
