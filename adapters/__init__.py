"""Session adapters: read-only views of coding agents' session stores.

Installed as ``llmem_hooks.adapters`` (pyproject maps this folder into the package), never
as a top-level ``adapters`` module. The OpenCode and Copilot CLI adapters land here.
"""

from __future__ import annotations
