"""Extraction: session transcripts -> memory candidates, summaries and self-assessments.

::

    transcript.py   which lines of a message were spoken, and their sentences
    candidates.py   Candidate, Assessment, the Extractor / Assessor protocols, the gate,
                    the split of sure candidates from the inbox's
    heuristics.py   HeuristicExtractor: statements people make on purpose
    smalltalk.py    small talk (never a memory) and substance (what earns an episode)
    supersede.py    changes of state: what "we moved from X to Y" makes stale
    summary.py      session summaries and the plain-text self-assessment
    engine.py       ExtractionEngine: heuristics + an optional model, never failing
    llm.py          OllamaExtractor, the model self-assessment, build_extraction_engine
    taxonomy.py     the self-assessment error categories

Imports are lazy (PEP 562), as in `llmem_hooks`: the session hooks and the Copilot hook
ask for the engine without paying for the model client (httpx) until one is built.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "Assessment": "candidates",
    "Assessor": "candidates",
    "Candidate": "candidates",
    "Extraction": "candidates",
    "Extractor": "candidates",
    "ReportsStatus": "candidates",
    "SessionAssessor": "candidates",
    "StagesCandidates": "candidates",
    "auto_tags": "candidates",
    "extract_staged": "candidates",
    "finalize_candidates": "candidates",
    "split_candidates": "candidates",
    "ExtractionEngine": "engine",
    "HeuristicExtractor": "heuristics",
    "ModelCaller": "llm",
    "OllamaExtractor": "llm",
    "build_extraction_engine": "llm",
    "render_message": "llm",
    "safe_text": "summary",
    "self_assessment": "summary",
    "replaced_term": "supersede",
    "supersede_replaced": "supersede",
    "session_goal": "summary",
    "summarize_session": "summary",
    "unique_recent": "summary",
    "ERROR_TAXONOMY": "taxonomy",
    "ERROR_TAXONOMY_KEYS": "taxonomy",
    "SELF_ASSESSMENT_FIELDS": "taxonomy",
    "parse_self_assessment": "taxonomy",
    "TranscriptLine": "transcript",
    "speech_lines": "transcript",
    "split_sentences": "transcript",
    "transcript_lines": "transcript",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'llmem_hooks.extraction' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:  # for type checkers and IDEs: the same names, imported eagerly
    from .candidates import (
        Assessment,
        Assessor,
        Candidate,
        Extraction,
        Extractor,
        ReportsStatus,
        SessionAssessor,
        StagesCandidates,
        auto_tags,
        extract_staged,
        finalize_candidates,
        split_candidates,
    )
    from .engine import ExtractionEngine
    from .heuristics import HeuristicExtractor
    from .llm import ModelCaller, OllamaExtractor, build_extraction_engine, render_message
    from .summary import (
        safe_text,
        self_assessment,
        session_goal,
        summarize_session,
        unique_recent,
    )
    from .supersede import replaced_term, supersede_replaced
    from .taxonomy import (
        ERROR_TAXONOMY,
        ERROR_TAXONOMY_KEYS,
        SELF_ASSESSMENT_FIELDS,
        parse_self_assessment,
    )
    from .transcript import TranscriptLine, speech_lines, split_sentences, transcript_lines

__all__ = [
    "ERROR_TAXONOMY",
    "ERROR_TAXONOMY_KEYS",
    "SELF_ASSESSMENT_FIELDS",
    "Assessment",
    "Assessor",
    "Candidate",
    "Extraction",
    "ExtractionEngine",
    "Extractor",
    "HeuristicExtractor",
    "ModelCaller",
    "OllamaExtractor",
    "ReportsStatus",
    "SessionAssessor",
    "StagesCandidates",
    "TranscriptLine",
    "auto_tags",
    "build_extraction_engine",
    "extract_staged",
    "finalize_candidates",
    "parse_self_assessment",
    "render_message",
    "replaced_term",
    "safe_text",
    "self_assessment",
    "session_goal",
    "speech_lines",
    "split_candidates",
    "split_sentences",
    "summarize_session",
    "supersede_replaced",
    "transcript_lines",
    "unique_recent",
]
