"""Where llmem's files live: ``$LLMEM_HOME`` or ``~/.config/llmem``, as a plain string.

`paths.get_llmem_home` is the rule everyone uses; it is here, with ``os.path`` only, so
that a process an agent waits for at every start (the MCP server's front) can find its
cache without importing ``pathlib`` and the path checks.
"""

from __future__ import annotations

import os


def llmem_home_dir() -> str:
    """The llmem home directory, always absolute.

    A relative ``$LLMEM_HOME`` is resolved against the current directory once, and the
    absolute form is written back to the environment: a process we start (the sidecar
    runs with its cwd in the home) would otherwise look for ``<home>/<home>``."""
    env = os.environ.get("LLMEM_HOME")
    if env:
        home = os.path.abspath(os.path.expanduser(env))
        if home != env:
            os.environ["LLMEM_HOME"] = home
        return home
    return os.path.abspath(os.path.join(os.path.expanduser("~"), ".config", "llmem"))
