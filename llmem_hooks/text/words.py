"""Words of free text: the one tokenizer for a query's words and the words of a text they
are matched against (passages), so both sides split ``foo:bar``, ``v1.2`` or ``c++`` alike.

A word starts with a letter or digit and may hold ``. - : / + # @`` inside (paths, versions,
handles, ``c#``); the punctuation around it is dropped. Other splitters keep their own
rules on purpose: `fuzzy` (the typo index: 3-32 ASCII letters), `dream.likeness` (wording
folded to ASCII for near-duplicates), `dream.rewrite` (tokens a rewrite must keep: flags,
``a=b``, ``~/``), extraction's candidate gate.
"""

from __future__ import annotations

import re

WORD = re.compile(r"[\w][\w.\-:/+#@]*[\w+#]|\w", re.UNICODE)


def words(text: str) -> list[str]:
    """Words of free text, lower-cased, punctuation around them removed."""
    return [w.lower() for w in WORD.findall(text)]
