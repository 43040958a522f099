"""JSON for the processes an agent waits for, without importing the ``json`` package.

``import json`` costs ~6 ms of every start: ``json.decoder`` compiles regular
expressions (``re``, ``enum``). The MCP server's front and the Copilot hook's front run at
every session start, and Copilot waits for both before its first turn, so they read and
write JSON through the interpreter's own C scanner and encoder (``_json``, which the
``json`` package itself uses): the same parser and the same output as ``json.loads`` and
``json.dumps``, with the package imported only when ``_json`` is missing or to build an
error message. `tests/agents/test_wire_json.py` checks both agree.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not `typing` at run time
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_WHITESPACE = " \t\n\r"  # JSON's own (json.decoder.WHITESPACE)
_CONSTANTS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


class _Context:
    """What ``_json.make_scanner`` reads from a decoder: ``json.loads``'s defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = staticmethod(_CONSTANTS.__getitem__)


def _not_serializable(value: object) -> object:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_scanner: Callable[[str, int], tuple[Any, int]] | None
try:
    import _json

    _scanner = _json.make_scanner(_Context())  # type: ignore[arg-type]
except (ImportError, AttributeError, TypeError):  # another interpreter: the package
    _scanner = None
_encoders: dict[tuple[bool, str, str], Callable[[Any, int], Any]] = {}


def loads(data: str | bytes) -> Any:
    """``json.loads(data)``: a ValueError for anything that is not one JSON value (bytes
    must be UTF-8), a RecursionError for absurd nesting, as the package does."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    if _scanner is None:
        import json

        return json.loads(text)
    start = len(text) - len(text.lstrip(_WHITESPACE))
    try:
        value, end = _scanner(text, start)
    except StopIteration as exc:
        raise ValueError(f"Expecting value at char {exc.value}") from None
    if text[end:].strip(_WHITESPACE):
        raise ValueError(f"Extra data at char {end}")
    return value


def dumps(
    value: Any, *, ensure_ascii: bool = True, separators: tuple[str, str] = (", ", ": ")
) -> str:
    """``json.dumps(value, ensure_ascii=..., separators=...)``."""
    item_sep, key_sep = separators
    key = (ensure_ascii, item_sep, key_sep)
    encode = _encoders.get(key)
    if encode is None:
        try:
            import _json

            quote = _json.encode_basestring_ascii if ensure_ascii else _json.encode_basestring
            encode = _json.make_encoder(
                {}, _not_serializable, quote, None, key_sep, item_sep, False, False, True
            )
        except (ImportError, AttributeError, TypeError):
            import json

            return json.dumps(value, ensure_ascii=ensure_ascii, separators=separators)
        _encoders[key] = encode
    if isinstance(value, str):  # as json.dumps: the C encoder takes containers and scalars
        import _json

        return (
            _json.encode_basestring_ascii(value) if ensure_ascii else _json.encode_basestring(value)
        )
    return "".join(encode(value, 0))
