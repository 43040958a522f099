"""`agents.wire_json` parses and writes exactly what the ``json`` package does (it is the
same C scanner and encoder, set up by hand), and nothing that it refuses."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmem_hooks.agents import wire_json

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(values, st.booleans(), st.sampled_from([(", ", ": "), (",", ":")]))
def test_it_agrees_with_the_json_package(
    value: Any, ascii_only: bool, separators: tuple[str, str]
) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only, separators=separators)
    assert wire_json.dumps(value, ensure_ascii=ascii_only, separators=separators) == text
    assert wire_json.loads(text) == json.loads(text)
    assert wire_json.loads(f" \n{text}\t\r\n".encode()) == value or value != value


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "{",
        '{"a": 1} x',
        "[1,]",
        "'a'",
        '"\x01"',
        "nul",
        "01",
        '{"a" 1}',
        "\ud800",
        "[1] [2]",
    ],
)
def test_what_json_refuses_it_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        wire_json.loads(text)


def test_constants_bytes_and_odd_values() -> None:
    assert math.isnan(wire_json.loads("NaN")) and wire_json.loads("-Infinity") == -math.inf
    assert wire_json.loads('"\\ud800"') == "\ud800"  # valid JSON: a lone surrogate escape
    with pytest.raises(ValueError):
        wire_json.loads(b"\xff{}")
    with pytest.raises(TypeError):
        wire_json.dumps({"a": object()})
    with pytest.raises(RecursionError):
        wire_json.loads("[" * 100_000)
    assert wire_json.dumps("é\n", ensure_ascii=False) == json.dumps("é\n", ensure_ascii=False)


def test_it_does_not_import_the_json_package() -> None:
    root = str(Path(wire_json.__file__).resolve().parents[2])
    probe = (
        f"import sys; sys.path.insert(0, {root!r})\n"
        "from llmem_hooks.agents import wire_json\n"
        'wire_json.dumps(wire_json.loads(\'{"a": [1, 2.5, null, "x"]}\'))\n'
        "print('json' in sys.modules, 're' in sys.modules)\n"
    )
    # -S: no site (an editable install's import hook loads re and pathlib itself)
    argv = [sys.executable, "-S", "-c", probe]
    out = subprocess.run(argv, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
