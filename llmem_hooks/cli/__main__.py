"""``python -m llmem_hooks.cli``: the same entry point as the ``llmem-hooks`` script."""

import sys

from . import main

sys.exit(main())
