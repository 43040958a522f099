"""llmem-hooks: a local memory layer for coding agents.

The public surface is re-exported here; everything else is private to its module.
Imports are lazy (PEP 562): the Copilot hook command runs on every session start and must
not pay for modules it does not use.

``_EXPORTS`` (name -> module) is the one list of the public names; ``__all__`` is derived
from it. The ``TYPE_CHECKING`` imports repeat it for type checkers and IDEs, which cannot
follow a lazy import; ``tests/test_exports.py`` keeps the two equal.
"""

from __future__ import annotations

# Not `typing`: this runs before every Copilot hook, and importing typing costs ~7 ms.
TYPE_CHECKING = False

_EXPORTS: dict[str, str] = {
    "Config": "config",
    "ConfigError": "errors",
    "DreamResult": "dream.cycle",
    "DreamRun": "dream.cycle",
    "Dreamer": "dream.cycle",
    "DEFAULT_ALPHA": "search.retriever",
    "DEFAULT_BLEND": "search.retriever",
    "DEFAULT_MEMORY_TYPES": "registry",
    "DEFAULT_RRF_K": "search.retriever",
    "ERROR_TAXONOMY": "extraction.taxonomy",
    "ERROR_TAXONOMY_KEYS": "extraction.taxonomy",
    "EmbeddingEngine": "model.embed",
    "EmbeddingMetrics": "model.metrics",
    "ImportFormatError": "errors",
    "LLMemError": "errors",
    "LifecycleEvent": "events",
    "Memory": "store",
    "MemoryFilter": "store",
    "MemoryStore": "store",
    "Message": "events",
    "ModelBudget": "model.budget",
    "NotFoundError": "errors",
    "OllamaClient": "model.ollama",
    "OllamaError": "model.ollama",
    "OllamaExtractor": "extraction.llm",
    "QueryService": "service.operations",
    "Retriever": "search.retriever",
    "SELF_ASSESSMENT_FIELDS": "extraction.taxonomy",
    "SearchError": "errors",
    "SearchHit": "search.retriever",
    "SessionEventManager": "session.hooks",
    "SessionHookCoordinator": "session.hooks",
    "SessionInfo": "events",
    "VALID_SESSION_EVENT_TYPES": "registry",
    "ValidationError": "errors",
    "build_extraction_engine": "extraction.llm",
    "compute_metrics": "model.metrics",
    "load_settings": "config",
    "create_session_hook_coordinator": "session.hooks",
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
    "register_dream_hook": "registry",
    "get_registered_dream_hooks": "registry",
    "validate_session_id": "paths",
    "write_config_yaml": "config",
}


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'llmem_hooks' has no attribute {name!r}")
    from importlib import import_module  # here: every hook and MCP start imports us

    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:  # the same names, eagerly, for type checkers and IDEs; "X as X"
    # marks a re-export (PEP 484), so no hand-kept __all__ literal is needed
    from .config import Config as Config
    from .config import load_config as load_config
    from .config import load_settings as load_settings
    from .config import write_config_yaml as write_config_yaml
    from .dream.cycle import Dreamer as Dreamer
    from .dream.cycle import DreamResult as DreamResult
    from .dream.cycle import DreamRun as DreamRun
    from .errors import ConfigError as ConfigError
    from .errors import ImportFormatError as ImportFormatError
    from .errors import LLMemError as LLMemError
    from .errors import NotFoundError as NotFoundError
    from .errors import SearchError as SearchError
    from .errors import ValidationError as ValidationError
    from .events import LifecycleEvent as LifecycleEvent
    from .events import Message as Message
    from .events import SessionInfo as SessionInfo
    from .extraction.llm import OllamaExtractor as OllamaExtractor
    from .extraction.llm import build_extraction_engine as build_extraction_engine
    from .extraction.taxonomy import ERROR_TAXONOMY as ERROR_TAXONOMY
    from .extraction.taxonomy import ERROR_TAXONOMY_KEYS as ERROR_TAXONOMY_KEYS
    from .extraction.taxonomy import SELF_ASSESSMENT_FIELDS as SELF_ASSESSMENT_FIELDS
    from .extraction.taxonomy import parse_self_assessment as parse_self_assessment
    from .model.budget import ModelBudget as ModelBudget
    from .model.embed import EmbeddingEngine as EmbeddingEngine
    from .model.metrics import EmbeddingMetrics as EmbeddingMetrics
    from .model.metrics import compute_metrics as compute_metrics
    from .model.ollama import OllamaClient as OllamaClient
    from .model.ollama import OllamaError as OllamaError
    from .paths import get_config_path as get_config_path
    from .paths import get_context_dir as get_context_dir
    from .paths import get_db_path as get_db_path
    from .paths import get_llmem_home as get_llmem_home
    from .paths import validate_session_id as validate_session_id
    from .registry import DEFAULT_MEMORY_TYPES as DEFAULT_MEMORY_TYPES
    from .registry import VALID_SESSION_EVENT_TYPES as VALID_SESSION_EVENT_TYPES
    from .registry import get_registered_dream_hooks as get_registered_dream_hooks
    from .registry import get_registered_session_hooks as get_registered_session_hooks
    from .registry import get_registered_types as get_registered_types
    from .registry import register_dream_hook as register_dream_hook
    from .registry import register_memory_type as register_memory_type
    from .registry import register_session_hook as register_session_hook
    from .search.retriever import DEFAULT_ALPHA as DEFAULT_ALPHA
    from .search.retriever import DEFAULT_BLEND as DEFAULT_BLEND
    from .search.retriever import DEFAULT_RRF_K as DEFAULT_RRF_K
    from .search.retriever import Retriever as Retriever
    from .search.retriever import SearchHit as SearchHit
    from .service.operations import QueryService as QueryService
    from .session.hooks import SessionEventManager as SessionEventManager
    from .session.hooks import SessionHookCoordinator as SessionHookCoordinator
    from .session.hooks import create_session_hook_coordinator as create_session_hook_coordinator
    from .store import Memory as Memory
    from .store import MemoryFilter as MemoryFilter
    from .store import MemoryStore as MemoryStore

__version__ = "0.1.0"

__all__ = ["__version__", *_EXPORTS]


def __dir__() -> list[str]:
    """The lazy names too, so ``dir(llmem_hooks)`` and completion show them."""
    return sorted({*globals(), *__all__})
