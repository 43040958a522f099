"""The Copilot hook run inside the sidecar: the query socket's ``copilot_hook`` method.

The hook's front (`agents.hook_front`) sends the raw payload here and prints the answer,
so a hook call costs an interpreter start and one round trip instead of our imports
(~20 ms of each session start and prompt the agent waits for). The sidecar's command
line registers `relay` with the query service (`service.server.Relay`).
"""

from __future__ import annotations

import io
import time
from collections.abc import Mapping
from typing import Any

from . import copilot_hook as hook
from .hook_log import log_line

RELAY_METHOD = "copilot_hook"
RELAY_DEADLINE_S = hook.DEADLINE_S - 0.1  # the front has started an interpreter and connected


def relay(service: Any, params: Mapping[str, Any]) -> dict[str, Any]:
    """The query socket's ``copilot_hook`` method: one hook call done in the warm sidecar
    for the front (`agents.hook_front`), which then starts no import of ours: ``params``
    ``{"event": <the hook's event argument>, "payload": <stdin, as text>, "copilot_home":
    <the hook's $COPILOT_HOME or null>}``; the result ``{"output": <what the hook prints>
    | null}``. The same `handle` as the hook process, failing open the same way."""
    from ..service.params import ServiceError
    from ..service.protocol import BAD_PARAMS

    event, payload = params.get("event"), params.get("payload")
    home = params.get("copilot_home")
    unknown = sorted(set(params) - {"event", "payload", "copilot_home"})
    if not isinstance(event, str) or not isinstance(payload, str) or unknown:
        raise ServiceError(BAD_PARAMS, "copilot_hook takes event and payload (strings)")
    if home is not None and not isinstance(home, str):
        raise ServiceError(BAD_PARAMS, "copilot_home must be a string or null")
    deadline = time.monotonic() + RELAY_DEADLINE_S
    hook.relay_state.service, hook.relay_state.copilot_home = service, home or None
    try:
        out = hook.handle(hook.AGENT, event, io.BytesIO(payload.encode("utf-8")), deadline)
    except Exception as exc:  # fail open, as `main`
        log_line(f"{event} failed: {type(exc).__name__}: {exc}")
        out = hook.unavailable_notice(event, exc)
    finally:
        hook.relay_state.service = hook.relay_state.copilot_home = None
    if time.monotonic() > deadline:  # the front has given up: nothing from us counts
        log_line(f"{event} took past its deadline in the sidecar")
    return {"output": out}
