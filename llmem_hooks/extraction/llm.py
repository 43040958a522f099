"""Extraction and self-assessment with a local model (Ollama), behind budgets and back-off.

`OllamaExtractor` is an `Extractor` and an `Assessor` (`candidates.py`): it sends the NEW
messages of a session (the coordinator passes only those after the stored cursor), made
safe first
(`summary.safe_text`: private spans out, credentials redacted; tool output truncated;
reasoning left out), in chunks that fit ``ollama.context_tokens`` — one ``/api/generate``
request (``stream: false``, a JSON schema in ``format``) per chunk — so the tokens an idle
event costs grow with its new messages only, never with the session's length.

Every answer is validated field by field. An answer that is not JSON or not of the
schema's shape is asked again ONCE; a second bad answer drops that chunk's model output
with a log line (the heuristics still ran on it: `ExtractionEngine` always unions their
candidates with the model's, so an explicit "remember that ..." is never lost).

`ModelCaller` is what extraction and the session-end self-assessment share: the client,
the `budget.ModelBudget` checked before and charged after every call (its remaining
seconds bound the request timeout), and a back-off — after a connection failure, a
timeout, a missing model or an error status the model is skipped for ``backoff_seconds``
instead of making every idle event wait for it. When the model cannot be asked the
caller raises, and `ExtractionEngine` falls back to the heuristics and says why.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, TypeVar

from ..config import Config, OllamaSettings
from ..errors import ConfigError, LLMemError
from ..events import Message
from ..model.backoff import BACKOFF_SECONDS, Backoff
from ..model.budget import BudgetExceeded, BudgetLimits, ModelBudget, estimate_tokens
from ..model.ollama import (
    OllamaClient,
    OllamaError,
    OllamaResponseError,
    OllamaTimeout,
    OllamaUnavailable,
)
from ..registry import get_registered_types
from ..store import MAX_CONTENT_CHARS, MemoryStore
from ..text.lines import clip_at_word
from .candidates import MIN_CONFIDENCE, Assessment, Candidate, Extraction, split_candidates
from .engine import ExtractionEngine
from .smalltalk import is_small_talk
from .summary import safe_text, self_assessment, session_goal
from .taxonomy import ERROR_TAXONOMY, ERROR_TAXONOMY_KEYS, OUTCOMES, category_tag
from .transcript import transcript_lines

log = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_MODEL: str = OllamaSettings.model
DEFAULT_CONTEXT_TOKENS: int = OllamaSettings.context_tokens
TOOL_OUTPUT_CHARS = 400  # per tool call / patch / code block sent to the model
CUT_MARK = "[... output cut]"
ANSWER_RESERVE_MIN = 256  # tokens kept free for the model's answer...
ANSWER_RESERVE_SHARE = 4  # ...or a quarter of the context, whichever is more
MIN_CHUNK_TOKENS = 128
# the model's guesses below this are not worth a memory: they go to the inbox instead
MIN_MODEL_CONFIDENCE = MIN_CONFIDENCE
ASSESS_FIELD_CHARS = 300
# Types made by the session-end hook itself, never proposed by extraction.
NOT_EXTRACTED = frozenset({"self_assessment", "conversation"})
PREFERRED_TYPES = ("fact", "decision", "preference", "procedure", "project_state", "event")
TYPE_MEANINGS = {
    "fact": "a lasting fact about the project or its environment (layout, versions, tools)",
    "decision": "a choice that was made, with its reason when one was given",
    "preference": "how the user wants things done (style, tools, habits)",
    "procedure": "a command or steps that work, or the fix that resolved an error",
    "project_state": "where a piece of work stands, when a later session needs to know",
    "event": "something that happened and matters later (an incident, a release)",
}
SCOPES = ("project", "global")

EXTRACT_SYSTEM = """\
You maintain the long-term memory of a coding assistant. From the new messages of a \
coding session, extract only DURABLE knowledge that will still help in a later session:
- decisions taken (what was chosen, and why when it was said);
- commands or steps that finally worked (after failures: the one that worked);
- errors and the fix that resolved them;
- the user's preferences and rules for how to work;
- lasting facts about the project (layout, tools, versions, conventions).
Do NOT extract chit-chat, greetings, questions, plans not carried out, progress reports, \
or anything only true for this moment. Write each memory as one standalone sentence that \
makes sense without the transcript. Never reproduce secrets: [REDACTED] marks removed \
ones. scope is "global" only for the user's general preferences, else "project". \
confidence is 0..1: how sure you are that this is durable and correct. List the ids of \
the messages it comes from in source_message_ids. When nothing is worth keeping, answer \
{"memories": []}. Answer with JSON matching the schema, nothing else."""

ASSESS_SYSTEM = """\
You review a finished coding-agent session and assess the agent's work honestly. Pick \
the ONE category that best names the most significant mistake made in the session \
(REVIEW_PASSED when the work went cleanly), say what happened, who or what caught it \
(a test, the user, a linter, self-review; "not caught" if nobody did), the fix you \
propose for next time, and the outcome. Be concrete and brief; never reproduce secrets. \
Answer with JSON matching the schema, nothing else."""


class MalformedAnswer(OllamaResponseError):
    """The model answered something that is not of the requested shape, twice."""


class _Invalid(ValueError):
    """One answer failed validation (it is asked again once)."""


# -- the caller ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CallResult:
    """A validated answer and what it cost."""

    value: Any
    tokens: int
    seconds: float


class ModelCaller:
    """One model behind the budget and the back-off; thread-safe.

    ``monotonic`` drives the back-off clock (tests inject one to skip ahead).
    """

    def __init__(
        self,
        client: OllamaClient,
        model: str,
        *,
        context_tokens: int = DEFAULT_CONTEXT_TOKENS,
        budget: ModelBudget | None = None,
        backoff_seconds: float = BACKOFF_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.model = model
        self.context_tokens = context_tokens
        self.budget = budget
        self.backoff = Backoff(backoff_seconds, monotonic)

    @property
    def shown_url(self) -> str:
        return self.client.shown_url

    def backing_off(self) -> str | None:
        """Why the model is skipped right now, or None when it may be asked."""
        down = self.backoff.blocked()
        if down is None:
            return None
        return f"{down[1]} (retrying in {math.ceil(down[0])} s)"

    def _back_off(self, reason: str) -> None:
        first = self.backoff.failed(reason)  # once an outage at info, then at debug
        log.log(
            logging.INFO if first else logging.DEBUG,
            "ollama: %s; using the heuristics (retried every %g s)",
            reason,
            self.backoff.seconds,
        )

    def _charge(self, key: str, prompt_tokens: int, output_tokens: int, seconds: float) -> None:
        if self.budget is not None:
            self.budget.record(
                key, prompt_tokens=prompt_tokens, output_tokens=output_tokens, seconds=seconds
            )

    def _generate_once(
        self, key: str, system: str, prompt: str, schema: Mapping[str, Any]
    ) -> tuple[str, int, float]:
        """One request: (answer text, tokens charged, seconds)."""
        down = self.backing_off()
        if down:
            raise OllamaUnavailable(down)
        estimate = estimate_tokens(system) + estimate_tokens(prompt)
        timeout = self.client.timeout
        bounded = False
        if self.budget is not None:
            check = self.budget.check(key, need_tokens=estimate)
            if not check.allowed:
                raise BudgetExceeded(check.reason)
            if check.seconds_left < timeout:
                timeout, bounded = check.seconds_left, True
        started = time.monotonic()
        try:
            result = self.client.generate(
                self.model,
                prompt,
                schema=schema,
                system=system,
                num_ctx=self.context_tokens,
                timeout=timeout,
            )
        except OllamaTimeout as exc:
            # The server worked on it: the time and the prompt are spent.
            self._charge(key, estimate, 0, time.monotonic() - started)
            if bounded:
                raise BudgetExceeded(
                    f"time budget ran out waiting for the model ({timeout:g} s left)"
                ) from None
            self._back_off(str(exc))
            raise
        except OllamaError as exc:
            self._back_off(str(exc))
            raise
        prompt_tokens = result.prompt_tokens or estimate
        output_tokens = result.output_tokens or estimate_tokens(result.text)
        self._charge(key, prompt_tokens, output_tokens, result.seconds)
        return result.text, prompt_tokens + output_tokens, result.seconds

    def call_json(
        self,
        *,
        key: str,
        system: str,
        prompt: str,
        schema: Mapping[str, Any],
        validate: Callable[[Any], T],
        what: str,
    ) -> CallResult:
        """Ask for JSON of ``schema``; ``validate`` turns it into a value or raises
        `_Invalid`. A malformed answer is asked again once, then `MalformedAnswer`."""
        tokens, seconds = 0, 0.0
        for attempt in (1, 2):
            text, spent, took = self._generate_once(key, system, prompt, schema)
            tokens, seconds = tokens + spent, seconds + took
            try:
                value = validate(json.loads(text))
            except (ValueError, _Invalid) as exc:  # JSONDecodeError is a ValueError
                log.warning("ollama %s: malformed answer (attempt %d of 2): %s", what, attempt, exc)
                continue
            return CallResult(value, tokens, seconds)
        raise MalformedAnswer(f"{what}: the model answered malformed JSON twice")


# -- making the transcript safe and small -------------------------------------------------


def _blocks_truncated(lines: Sequence[tuple[str, str]], limit: int) -> list[str]:
    """Speech kept whole; each tool call, patch, code block or error cut to ``limit``
    characters; reasoning dropped (the model's own thoughts, long and rarely durable)."""
    out: list[str] = []
    kind_before = "speech"
    used = 0
    cut = False
    for kind, text in lines:
        if kind == "reasoning":
            kind_before = kind
            continue
        if kind == "speech":
            out.append(text)
            kind_before = kind
            continue
        if kind != kind_before or text.startswith(("Tool:", "Patch")):
            used, cut = 0, False
        kind_before = kind
        if used >= limit:
            if not cut:
                out.append(CUT_MARK)
                cut = True
            continue
        room = limit - used
        out.append(text[:room])
        used += len(text) + 1  # the newline counts
        if len(text) > room:
            out.append(CUT_MARK)
            cut = True
    return out


def render_message(message: Message, *, tool_chars: int = TOOL_OUTPUT_CHARS) -> str:
    """``[<id>] User: ...`` for the model: private spans and credentials removed BEFORE
    anything is cut (a cut secret would no longer be recognized), tool output truncated;
    empty when nothing safe is left."""
    safe = safe_text(message.text)
    if not safe.strip():
        return ""
    lines = [(ln.kind, ln.text) for ln in transcript_lines(replace(message, text=safe))]
    body = "\n".join(_blocks_truncated(lines, tool_chars)).strip()
    if not body:
        return ""
    role = "User" if message.role == "user" else "Assistant"
    return f"[{message.id}] {role}: {body}"


@dataclass(frozen=True)
class Chunk:
    """Rendered messages that fit one request, and their ids."""

    text: str
    message_ids: tuple[str, ...]


def chunk_messages(
    messages: Sequence[Message], max_chars: int, *, tool_chars: int = TOOL_OUTPUT_CHARS
) -> list[Chunk]:
    """The messages rendered and packed in order into chunks of at most ``max_chars``
    (a single longer message is cut to fit)."""
    chunks: list[Chunk] = []
    parts: list[str] = []
    ids: list[str] = []
    size = 0
    marker = "\n[... message cut]"
    for message in messages:
        text = render_message(message, tool_chars=tool_chars)
        if not text:
            continue
        if len(text) > max_chars:
            text = text[: max(0, max_chars - len(marker))] + marker
        if parts and size + 2 + len(text) > max_chars:
            chunks.append(Chunk("\n\n".join(parts), tuple(ids)))
            parts, ids, size = [], [], 0
        parts.append(text)
        ids.append(message.id)
        size += len(text) + (2 if len(parts) > 1 else 0)
    if parts:
        chunks.append(Chunk("\n\n".join(parts), tuple(ids)))
    return chunks


# -- schemas and validation ---------------------------------------------------------------


def extractable_types() -> list[str]:
    """The registered memory types extraction may propose, the usual ones first."""
    types = get_registered_types() - NOT_EXTRACTED
    return [t for t in PREFERRED_TYPES if t in types] + sorted(types - set(PREFERRED_TYPES))


def memory_schema(types: Sequence[str]) -> dict[str, Any]:
    """The JSON schema extraction answers follow (sent as ``format``)."""
    item = {
        "type": "object",
        "properties": {
            "type": {"type": "string", "enum": list(types)},
            "content": {"type": "string"},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "tags": {"type": "array", "items": {"type": "string"}},
            "scope": {"type": "string", "enum": list(SCOPES)},
            "source_message_ids": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["type", "content", "confidence", "tags", "scope", "source_message_ids"],
    }
    return {
        "type": "object",
        "properties": {"memories": {"type": "array", "items": item}},
        "required": ["memories"],
    }


def _str_list(value: Any, name: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _Invalid(f"{name} is not a list of strings")
    return value


def _memory_item(item: Any, types: frozenset[str], chunk_ids: Sequence[str]) -> Candidate:
    """One memory of an answer, every field checked; raises `_Invalid`."""
    if not isinstance(item, dict):
        raise _Invalid("a memory is not an object")
    kind = item.get("type")
    if not isinstance(kind, str) or kind not in types:
        raise _Invalid(f"unknown memory type {str(kind)[:40]!r}")
    content = item.get("content")
    if not isinstance(content, str) or not content.strip():
        raise _Invalid("content is not a non-empty string")
    if len(content) > MAX_CONTENT_CHARS:
        raise _Invalid("content is too long")
    confidence = item.get("confidence")
    if isinstance(confidence, bool) or not isinstance(confidence, int | float):
        raise _Invalid("confidence is not a number")
    if not 0.0 <= float(confidence) <= 1.0:
        raise _Invalid("confidence is not between 0 and 1")
    tags = _str_list(item.get("tags"), "tags")
    scope = item.get("scope", "project")
    if scope not in SCOPES:
        raise _Invalid(f"scope {str(scope)[:20]!r} is not project or global")
    cited = _str_list(item.get("source_message_ids"), "source_message_ids")
    ids = [i for i in cited if i in chunk_ids] or list(chunk_ids)
    return Candidate(
        type=kind,
        content=content.strip(),
        confidence=float(confidence),
        tags=[t for t in tags if t.strip()][:10],
        scope=scope,
        source_message_ids=ids,
    )


def parse_memories(data: Any, types: Sequence[str], chunk_ids: Sequence[str]) -> list[Candidate]:
    """An extraction answer -> candidates. The wrong shape, or memories none of which is
    valid, raise `_Invalid` (the answer is asked again); single bad items are skipped, and
    so is small talk (`smalltalk.is_small_talk`: never a memory, whoever proposes it)."""
    if not isinstance(data, dict) or not isinstance(data.get("memories"), list):
        raise _Invalid('the answer is not an object with a "memories" list')
    allowed = frozenset(types)
    out: list[Candidate] = []
    errors: list[str] = []
    social = 0
    for item in data["memories"]:
        try:
            cand = _memory_item(item, allowed, chunk_ids)
        except _Invalid as exc:
            errors.append(str(exc))
            continue
        if is_small_talk(cand.content):  # a model too can take "Always here to help." for a rule
            social += 1
            continue
        out.append(cand)  # below MIN_MODEL_CONFIDENCE too: `split_candidates` stages it
    if social:
        log.info("ollama extraction: %d small-talk memories dropped", social)
    if errors and not out and len(errors) == len(data["memories"]):
        raise _Invalid(f"no valid memory in the answer ({errors[0]})")
    if errors:
        log.info("ollama extraction: %d invalid memories skipped (%s)", len(errors), errors[0])
    return out


def assessment_schema() -> dict[str, Any]:
    """The JSON schema of a model self-assessment (category from the taxonomy)."""
    return {
        "type": "object",
        "properties": {
            "category": {"type": "string", "enum": list(ERROR_TAXONOMY_KEYS)},
            "what_happened": {"type": "string"},
            "caught_by": {"type": "string"},
            "proposed_fix": {"type": "string"},
            "outcome": {"type": "string", "enum": list(OUTCOMES)},
        },
        "required": ["category", "what_happened", "caught_by", "proposed_fix", "outcome"],
    }


def parse_assessment(data: Any) -> dict[str, str]:
    """A self-assessment answer, every field checked; raises `_Invalid`."""
    if not isinstance(data, dict):
        raise _Invalid("the answer is not an object")
    out: dict[str, str] = {}
    for name in ("category", "what_happened", "caught_by", "proposed_fix", "outcome"):
        value = data.get(name)
        if not isinstance(value, str):
            raise _Invalid(f"{name} is not a string")
        out[name] = clip_at_word(safe_text(value), ASSESS_FIELD_CHARS)
    if out["category"].upper() not in ERROR_TAXONOMY:
        raise _Invalid(f"category {out['category'][:40]!r} is not in the taxonomy")
    out["category"] = out["category"].upper()
    if out["outcome"] not in OUTCOMES:
        raise _Invalid(f"outcome {out['outcome'][:20]!r} is not one of {', '.join(OUTCOMES)}")
    if not out["what_happened"].strip(" ."):
        raise _Invalid("what_happened is empty")
    return out


def assessment_text(fields: Mapping[str, str]) -> str:
    """``CATEGORY: what happened. Caught by: ... Proposed fix: ... Outcome: ...`` — the
    first part is what `taxonomy.parse_self_assessment` reads back."""

    def sentence(text: str) -> str:
        text = text.strip().rstrip(".")
        return f"{text}." if text else ""

    parts = [f"{fields['category']}: {sentence(fields['what_happened'])}"]
    if fields.get("caught_by", "").strip(" ."):
        parts.append(f"Caught by: {sentence(fields['caught_by'])}")
    if fields.get("proposed_fix", "").strip(" ."):
        parts.append(f"Proposed fix: {sentence(fields['proposed_fix'])}")
    parts.append(f"Outcome: {fields['outcome']}.")
    return " ".join(parts)


# -- the extractor ------------------------------------------------------------------------


class OllamaExtractor:
    """An `Extractor` backed by a local model; also an `Assessor` of finished sessions.

    ``session_key`` maps a session id to the key its usage is recorded under (default:
    the id itself; `build_extraction_engine` uses ``<agent>:<session id>``).
    """

    name = "ollama"

    def __init__(
        self,
        caller: ModelCaller,
        *,
        session_key: Callable[[str], str] | None = None,
        tool_chars: int = TOOL_OUTPUT_CHARS,
    ) -> None:
        self.caller = caller
        self.session_key = session_key or (lambda sid: sid)
        self.tool_chars = tool_chars
        self.last_status = ""

    @property
    def model(self) -> str:
        return self.caller.model

    def chunk_chars(self, system: str = EXTRACT_SYSTEM) -> int:
        """How many transcript characters one request may carry: the context minus the
        instructions, the schema and room for the answer."""
        ctx = self.caller.context_tokens
        overhead = estimate_tokens(system) + estimate_tokens(
            json.dumps(memory_schema(extractable_types()))
        )
        overhead += estimate_tokens(self._types_text()) + 64  # the prompt's own lines
        reserve = max(ANSWER_RESERVE_MIN, ctx // ANSWER_RESERVE_SHARE)
        return max(MIN_CHUNK_TOKENS, ctx - overhead - reserve) * 4

    @staticmethod
    def _types_text() -> str:
        return "\n".join(
            f"- {t}: {TYPE_MEANINGS.get(t, 'a memory of this kind')}" for t in extractable_types()
        )

    def build_prompt(self, chunk: Chunk, project: str | None = None) -> str:
        return (
            f"Memory types:\n{self._types_text()}\n\n"
            "New messages of the session (each starts with its [message id]):\n\n"
            f"{chunk.text}\n\n"
            "Extract the durable memories as JSON."
        )

    def extract(
        self, messages: Sequence[Message], *, project: str | None = None
    ) -> list[Candidate]:
        """The model's candidates sure enough to keep (`extract_staged`)."""
        return self.extract_staged(messages, project=project).memories

    def extract_staged(
        self, messages: Sequence[Message], *, project: str | None = None
    ) -> Extraction:
        """Candidates from the model, one request per chunk, parted by their confidence
        (the unsure ones are for the inbox). Raises (so the engine falls back to the
        heuristics) when the first request cannot be made; a later failure keeps what
        earlier chunks gave."""
        self.last_status = ""
        if not messages:
            self.last_status = "ollama: no messages"
            return Extraction()
        key = self.session_key(messages[0].session_id)
        chunks = chunk_messages(messages, self.chunk_chars(), tool_chars=self.tool_chars)
        types = extractable_types()
        schema = memory_schema(types)
        out: list[Candidate] = []
        dropped = 0
        stopped = ""
        tokens = 0
        for i, chunk in enumerate(chunks):
            try:
                result = self.caller.call_json(
                    key=key,
                    system=EXTRACT_SYSTEM,
                    prompt=self.build_prompt(chunk, project),
                    schema=schema,
                    validate=partial(parse_memories, types=types, chunk_ids=chunk.message_ids),
                    what="extraction",
                )
            except MalformedAnswer as exc:
                dropped += 1
                log.warning(
                    "ollama extraction: chunk %d of %d dropped (%s); messages %s..%s",
                    i + 1,
                    len(chunks),
                    exc,
                    chunk.message_ids[0],
                    chunk.message_ids[-1],
                )
                continue
            except LLMemError as exc:
                if i == 0:
                    raise
                stopped = str(exc)
                log.warning(
                    "ollama extraction stopped after %d of %d chunks: %s", i, len(chunks), exc
                )
                break
            tokens += result.tokens
            out.extend(result.value)
        status = f"ollama: {len(chunks)} chunk{'s' if len(chunks) != 1 else ''}, {tokens} tokens"
        if dropped:
            status += f", {dropped} dropped (malformed answer)"
        if stopped:
            status += f", stopped early: {stopped}"
        self.last_status = status
        return split_candidates(out)

    def assess_prompt(self, messages: Sequence[Message]) -> str:
        """The goal, the plain counts and as much of the END of the session as fits one
        request (how a session ended says most about how it went)."""
        budget = self.chunk_chars(ASSESS_SYSTEM)
        rendered = [
            r for r in (render_message(m, tool_chars=self.tool_chars) for m in messages) if r
        ]
        kept: list[str] = []
        size = 0
        for text in reversed(rendered):
            if size + len(text) + 2 > budget:
                if not kept:
                    kept.append(text[-budget:])
                break
            kept.append(text)
            size += len(text) + 2
        kept.reverse()
        categories = "\n".join(f"- {k}: {v}" for k, v in ERROR_TAXONOMY.items())
        goal = session_goal(messages) or "unknown"
        omitted = len(rendered) - len(kept)
        head = f"({omitted} earlier messages omitted)\n\n" if omitted > 0 else ""
        return (
            f"Categories:\n{categories}\n\nSession goal: {goal}\n"
            f"Counts: {self_assessment(messages)}\n\nTranscript:\n\n{head}"
            + "\n\n".join(kept)
            + "\n\nAssess the session as JSON."
        )

    def assess(self, messages: Sequence[Message], *, session_key: str | None = None) -> Assessment:
        """The model's self-assessment of a finished session; raises an `LLMemError`
        when it cannot be had (the engine then degrades to the plain-text counts)."""
        if not messages:
            raise LLMemError("no messages to assess")
        key = session_key or self.session_key(messages[0].session_id)
        result = self.caller.call_json(
            key=key,
            system=ASSESS_SYSTEM,
            prompt=self.assess_prompt(messages),
            schema=assessment_schema(),
            validate=parse_assessment,
            what="self-assessment",
        )
        fields: dict[str, str] = result.value
        text = clip_at_word(assessment_text(fields), 1000)
        return Assessment(
            content=text,
            tags=["self-assessment", category_tag(fields["category"])],
            metadata={**fields, "assessed_by": "ollama", "model": self.model},
            assessed_by="ollama",
        )


# -- wiring from config -------------------------------------------------------------------


def build_extraction_engine(
    config: Config | Mapping[str, Any],
    store: MemoryStore | None = None,
    *,
    clock: Callable[[], float] = time.time,
    monotonic: Callable[[], float] = time.monotonic,
    backoff_seconds: float = BACKOFF_SECONDS,
) -> ExtractionEngine:
    """The engine the hooks use: with the Ollama extractor when ``ollama.enabled`` (budgets
    recorded in ``store``), the heuristics otherwise. Never raises for a bad
    ``ollama.base_url``: it is logged and the heuristics run."""
    settings = Config.coerce(config)
    if not settings.ollama.enabled:
        return ExtractionEngine(reason="ollama.enabled is false")
    try:
        client = OllamaClient.from_config(settings)
    except (ConfigError, ValueError, TypeError) as exc:
        log.warning("ollama disabled: %s", exc)
        return ExtractionEngine(reason=str(exc))
    budget = None
    if store is not None:
        budget = ModelBudget(store, BudgetLimits.from_config(settings), clock=clock)
    caller = ModelCaller(
        client,
        settings.ollama.model,
        context_tokens=settings.ollama.context_tokens,
        budget=budget,
        backoff_seconds=backoff_seconds,
        monotonic=monotonic,
    )

    def session_key(session_id: str) -> str:
        if store is not None:
            from ..store import sessions as session_state

            rec = session_state.find(store.db, session_id)
            if rec is not None:
                return f"{rec.agent}:{session_id}"
        return session_id

    return ExtractionEngine(OllamaExtractor(caller, session_key=session_key))
