"""llmem-hooks: a local memory layer for coding agents.

The public surface is re-exported here; everything else is private to its module.
"""

from __future__ import annotations

from .config import load_config, write_config_yaml
from .errors import (
    ConfigError,
    ImportFormatError,
    LLMemError,
    NotFoundError,
    SearchError,
    ValidationError,
)
from .events import LifecycleEvent, Message, SessionInfo
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
    "VALID_SESSION_EVENT_TYPES",
    "ConfigError",
    "ImportFormatError",
    "LLMemError",
    "LifecycleEvent",
    "MemoryFilter",
    "MemoryStore",
    "Message",
    "NotFoundError",
    "Retriever",
    "SearchError",
    "SessionEventManager",
    "SessionHookCoordinator",
    "SessionInfo",
    "ValidationError",
    "__version__",
    "create_session_hook_coordinator",
    "get_config_path",
    "get_context_dir",
    "get_db_path",
    "get_llmem_home",
    "get_registered_session_hooks",
    "get_registered_types",
    "load_config",
    "register_memory_type",
    "register_session_hook",
    "validate_session_id",
    "write_config_yaml",
]
