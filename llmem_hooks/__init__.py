"""llmem-hooks: a local memory layer for coding agents.

The public surface is re-exported here; everything else is private to its module.
Imports are lazy (PEP 562): the Copilot hook command runs on every session start and must
not pay for modules it does not use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "ConfigError": "errors",
    "DEFAULT_ALPHA": "retrieve",
    "DEFAULT_BLEND": "retrieve",
    "DEFAULT_MEMORY_TYPES": "registry",
    "DEFAULT_RRF_K": "retrieve",
    "ERROR_TAXONOMY": "extraction.taxonomy",
    "ERROR_TAXONOMY_KEYS": "extraction.taxonomy",
    "EmbeddingEngine": "embed",
    "EmbeddingMetrics": "metrics",
    "ImportFormatError": "errors",
    "LLMemError": "errors",
    "LifecycleEvent": "events",
    "MemoryFilter": "store",
    "MemoryStore": "store",
    "Message": "events",
    "ModelBudget": "budget",
    "NotFoundError": "errors",
    "OllamaClient": "ollama",
    "OllamaError": "ollama",
    "OllamaExtractor": "extraction.llm",
    "Retriever": "retrieve",
    "SELF_ASSESSMENT_FIELDS": "extraction.taxonomy",
    "SearchError": "errors",
    "SessionEventManager": "session_hooks",
    "SessionHookCoordinator": "session_hooks",
    "SessionInfo": "events",
    "VALID_SESSION_EVENT_TYPES": "registry",
    "ValidationError": "errors",
    "build_extraction_engine": "extraction.llm",
    "compute_metrics": "metrics",
    "create_session_hook_coordinator": "session_hooks",
    "get_config_path": "paths",
    "get_context_dir": "paths",
    "get_db_path": "paths",
    "get_llmem_home": "paths",
    "get_registered_session_hooks": "registry",
    "get_registered_types": "registry",
    "load_config": "config",
    "parse_self_assessment": "extraction.taxonomy",
    "register_memory_type": "registry",
    "register_session_hook": "registry",
    "validate_session_id": "paths",
    "write_config_yaml": "config",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'llmem_hooks' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:  # for type checkers and IDEs: the same names, imported eagerly
    from .budget import ModelBudget
    from .config import load_config, write_config_yaml
    from .embed import EmbeddingEngine
    from .errors import (
        ConfigError,
        ImportFormatError,
        LLMemError,
        NotFoundError,
        SearchError,
        ValidationError,
    )
    from .events import LifecycleEvent, Message, SessionInfo
    from .extraction.llm import OllamaExtractor, build_extraction_engine
    from .extraction.taxonomy import (
        ERROR_TAXONOMY,
        ERROR_TAXONOMY_KEYS,
        SELF_ASSESSMENT_FIELDS,
        parse_self_assessment,
    )
    from .metrics import EmbeddingMetrics, compute_metrics
    from .ollama import OllamaClient, OllamaError
    from .paths import (
        get_config_path,
        get_context_dir,
        get_db_path,
        get_llmem_home,
        validate_session_id,
    )
    from .registry import (
        DEFAULT_MEMORY_TYPES,
        VALID_SESSION_EVENT_TYPES,
        get_registered_session_hooks,
        get_registered_types,
        register_memory_type,
        register_session_hook,
    )
    from .retrieve import DEFAULT_ALPHA, DEFAULT_BLEND, DEFAULT_RRF_K, Retriever
    from .session_hooks import (
        SessionEventManager,
        SessionHookCoordinator,
        create_session_hook_coordinator,
    )
    from .store import MemoryFilter, MemoryStore

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_BLEND",
    "DEFAULT_MEMORY_TYPES",
    "DEFAULT_RRF_K",
    "ERROR_TAXONOMY",
    "ERROR_TAXONOMY_KEYS",
    "SELF_ASSESSMENT_FIELDS",
    "VALID_SESSION_EVENT_TYPES",
    "ConfigError",
    "EmbeddingEngine",
    "EmbeddingMetrics",
    "ImportFormatError",
    "LLMemError",
    "LifecycleEvent",
    "MemoryFilter",
    "MemoryStore",
    "Message",
    "ModelBudget",
    "NotFoundError",
    "OllamaClient",
    "OllamaError",
    "OllamaExtractor",
    "Retriever",
    "SearchError",
    "SessionEventManager",
    "SessionHookCoordinator",
    "SessionInfo",
    "ValidationError",
    "__version__",
    "build_extraction_engine",
    "compute_metrics",
    "create_session_hook_coordinator",
    "get_config_path",
    "get_context_dir",
    "get_db_path",
    "get_llmem_home",
    "get_registered_session_hooks",
    "get_registered_types",
    "load_config",
    "parse_self_assessment",
    "register_memory_type",
    "register_session_hook",
    "validate_session_id",
    "write_config_yaml",
]
