"""The dream cycle's optional model rewrite of a merge group's kept text (docs/dream.md).

Why: merging keeps the best existing text, so a group whose members each add a detail
("tests run with pytest" / "tests run with pytest -q in CI") keeps only one phrasing. With
``dream.model_rewrite`` on and a local model answering, the model is asked for ONE
self-contained sentence holding every fact of the group (JSON ``{"text": ...}``).

Nothing the model says is trusted: the proposal is accepted only if it is non-empty, at
most `LENGTH_FACTOR` x the longest member, keeps every number- or identifier-like token
of the members and adds none (no fact lost or invented, `fact_tokens`), and is left
unchanged by the store's redaction. Otherwise the best text stays. The members are sent
through `extraction.summary.safe_text` (private spans out, credentials redacted) first.

Every call goes through `extraction.llm.ModelCaller` (the model budget, charged to the
session key ``dream:<run id>``) and the back-off shared between processes
(`backoff.SharedBackoff`); the first failure (down, timeout, budget) ends the asking for
the rest of the run, and the cycle goes on with the best texts.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..config import Config
from ..errors import LLMemError
from ..extraction.llm import ModelCaller
from ..extraction.summary import safe_text
from ..model.backoff import SharedBackoff
from ..model.budget import BudgetExceeded, BudgetLimits, ModelBudget
from ..model.ollama import OllamaClient, OllamaError, OllamaTimeout, OllamaUnavailable
from ..redact import redact_secrets
from ..store import MemoryStore

log = logging.getLogger(__name__)

LENGTH_FACTOR = 1.5
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
}
SYSTEM = """\
You merge near-duplicate notes of a coding assistant's long-term memory. Write ONE \
self-contained sentence that states every fact of the notes: keep every number, version, \
name, command, flag, path and identifier exactly as written; add nothing that is not in \
the notes; do not explain. [REDACTED] marks removed secrets: never guess them. Answer \
with JSON {"text": "..."} and nothing else."""

_TOKEN = re.compile(r"[\w./:@#+~=-]+")
_EDGE = ".,:;!?-=/"


def fact_tokens(text: str) -> set[str]:
    """The tokens a rewrite must neither lose nor invent, case-folded: those holding a
    digit or an underscore, a dot, slash, colon or @ inside (``3.11``, ``src/app.py``,
    ``host:8080``), a leading dash (``--frozen``) or an inner capital (``camelCase``)."""
    out: set[str] = set()
    for raw in _TOKEN.findall(text):
        tok = raw.rstrip(_EDGE)
        flag = tok.startswith("-") and len(tok.lstrip("-")) > 0
        tok = tok if flag else tok.lstrip(_EDGE)
        if not tok:
            continue
        inner = tok[1:-1]
        if (
            flag
            or any(c.isdigit() for c in tok)
            or "_" in tok
            or any(c in inner for c in "./:@")
            or (any(c.isupper() for c in tok[1:]) and any(c.islower() for c in tok))
        ):
            out.add(tok.casefold())
    return out


def check_proposal(proposal: str, members: Sequence[str]) -> tuple[str | None, str]:
    """(the accepted one-line text, "accepted") or (None, why it was rejected)."""
    text = " ".join(str(proposal).split())
    if not text:
        return None, "empty"
    longest = max((len(m) for m in members), default=0)
    if len(text) > LENGTH_FACTOR * longest:
        return None, f"too long ({len(text)} > {LENGTH_FACTOR:g} x {longest} characters)"
    want = set().union(*(fact_tokens(m) for m in members))
    got = fact_tokens(text)
    if want - got:
        return None, "drops " + ", ".join(sorted(want - got)[:5])
    if got - want:
        return None, "adds " + ", ".join(sorted(got - want)[:5])
    if redact_secrets(text) != text:
        return None, "holds what the redaction removes"
    return text, "accepted"


@dataclass(frozen=True)
class Rewrite:
    """What became of one group: ``text`` when the model's sentence was accepted."""

    text: str | None
    status: str  # "accepted", "rejected: ...", "skipped: ..."


def _text_of(data: Any) -> str:
    if not isinstance(data, dict) or not isinstance(data.get("text"), str):
        raise ValueError('expected {"text": "..."}')
    return str(data["text"])


class GroupRewriter:
    """Asks the model for one sentence per merge group, at most ``max_groups`` per run.

    Close it (or use ``with``) to close its HTTP client."""

    def __init__(
        self,
        caller: ModelCaller,
        session_key: str,
        *,
        shared_backoff: SharedBackoff | None = None,
        max_groups: int = 50,
    ) -> None:
        self.caller = caller
        self.session_key = session_key
        self.shared_backoff = shared_backoff
        self.max_groups = max_groups
        self.asked = 0
        self.stopped: str | None = None  # why no more groups are asked this run

    @property
    def model(self) -> str:
        return self.caller.model

    def close(self) -> None:
        self.caller.client.close()

    def __enter__(self) -> GroupRewriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def prompt(self, members: Sequence[str]) -> str:
        notes = "\n".join(f"{i}. {m}" for i, m in enumerate(members, 1))
        return f"Notes to merge into one sentence:\n{notes}"

    def rewrite(self, texts: Sequence[str]) -> Rewrite:
        """The model's sentence for a group's texts (kept text first), checked; the
        reason when it is not used. Never raises for a model failure."""
        members = [" ".join(safe_text(t).split()) for t in texts]
        members = [m for m in members if m]
        if len({m.casefold() for m in members}) < 2:
            return Rewrite(None, "skipped: the texts are the same")
        if self.stopped:
            return Rewrite(None, f"skipped: {self.stopped}")
        if self.asked >= self.max_groups:
            return Rewrite(None, f"skipped: {self.max_groups} groups asked in this run")
        url = self.caller.client.base_url
        if self.shared_backoff is not None:
            failure = self.shared_backoff.blocked(url)
            if failure is not None:
                self.stopped = f"{failure.cause()} (backing off)"
                return Rewrite(None, f"skipped: {self.stopped}")
        self.asked += 1
        try:
            answer = self.caller.call_json(
                key=self.session_key,
                system=SYSTEM,
                prompt=self.prompt(members),
                schema=SCHEMA,
                validate=_text_of,
                what="dream rewrite",
            )
        except (OllamaTimeout, OllamaUnavailable) as exc:
            self._failed(url, "timeout" if isinstance(exc, OllamaTimeout) else "down", exc)
            return Rewrite(None, f"skipped: {exc}")
        except (BudgetExceeded, OllamaError) as exc:
            self.stopped = str(exc)
            log.info("dream rewrite: %s; keeping the best texts", exc)
            return Rewrite(None, f"skipped: {exc}")
        if self.shared_backoff is not None:
            self.shared_backoff.succeeded(url)
        text, why = check_proposal(answer.value, members)
        if text is None:
            log.info("dream rewrite rejected (%s); keeping the best text", why)
            return Rewrite(None, f"rejected: {why}")
        return Rewrite(text, why)

    def _failed(self, url: str, kind: str, exc: Exception) -> None:
        self.stopped = str(exc)
        log.warning("dream rewrite: %s; keeping the best texts for this run", exc)
        if self.shared_backoff is not None:
            self.shared_backoff.failed(url, kind, str(exc), self.caller.client.timeout)


def dream_caller(config: Config, store: MemoryStore, step: str) -> ModelCaller | None:
    """The model as a dream step asks it: the configured client within the day's budget;
    None (logged as "``step`` off") when the URL is refused."""
    try:
        client = OllamaClient.from_config(config)
    except (LLMemError, ValueError) as exc:
        log.warning("%s off: %s", step, exc)
        return None
    return ModelCaller(
        client,
        config.ollama.model,
        context_tokens=config.ollama.context_tokens,
        budget=ModelBudget(store, BudgetLimits.from_config(config)),
    )


def build_rewriter(
    config: Config, store: MemoryStore, run_id: str, *, shared_backoff: SharedBackoff | None
) -> GroupRewriter | None:
    """A rewriter when ``dream.model_rewrite`` and ``ollama.enabled`` are on and the URL
    is accepted; None otherwise (a refused URL is logged)."""
    if not (config.dream.model_rewrite and config.ollama.enabled):
        return None
    caller = dream_caller(config, store, "dream rewrite")
    if caller is None:
        return None
    return GroupRewriter(
        caller,
        f"dream:{run_id}",
        shared_backoff=shared_backoff,
        max_groups=config.dream.model_rewrite_max_groups,
    )
