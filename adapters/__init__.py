"""Session adapters: read-only views of coding agents' session stores.

Installed as ``llmem_hooks.adapters`` (pyproject maps this folder into the package), never
as a top-level ``adapters`` module. Importing it registers the built-in adapters, so
``get_adapter_class("opencode")`` (or ``"copilot"``) works for the sidecar and the CLI.
"""

from __future__ import annotations

from .base import SessionAdapter, get_adapter_class, register_session_adapter, registered_adapters
from .copilot import CopilotAdapter
from .opencode import OpenCodeAdapter

register_session_adapter("opencode", OpenCodeAdapter)
register_session_adapter("copilot", CopilotAdapter)

__all__ = [
    "CopilotAdapter",
    "OpenCodeAdapter",
    "SessionAdapter",
    "get_adapter_class",
    "register_session_adapter",
    "registered_adapters",
]
