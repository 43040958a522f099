"""The query service's request parameters, checked before a method runs: one line naming
the parameter and what it must be (`protocol.BAD_PARAMS`), never a traceback."""

from __future__ import annotations

from typing import Any

from ..errors import LLMemError
from . import protocol as proto

MAX_GET_IDS = 20


class ServiceError(LLMemError):
    """An error the service reports to its caller with a protocol code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _require(value: Any, name: str, kind: type | tuple[type, ...]) -> Any:
    if value is None or isinstance(value, bool) or not isinstance(value, kind):
        raise ServiceError(proto.BAD_PARAMS, f"{name} must be a {_kind_name(kind)}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(
        {str: "string", int: "integer", list: "list"}.get(k, k.__name__) for k in kinds
    )


def _text(value: Any, name: str, limit: int = 10_000) -> str:
    text = _require(value, name, str)
    if not text.strip():
        raise ServiceError(proto.BAD_PARAMS, f"{name} must not be empty")
    if len(text) > limit:
        raise ServiceError(proto.BAD_PARAMS, f"{name} is longer than {limit} characters")
    return str(text)


def _no_nul(text: str, name: str) -> str:
    if "\x00" in text:
        raise ServiceError(proto.BAD_PARAMS, f"{name} must not hold a NUL character")
    return text


def _bounded(value: Any, name: str, lo: int, hi: int) -> int:
    n = _require(value, name, int)
    if not lo <= n <= hi:
        raise ServiceError(proto.BAD_PARAMS, f"{name} must be between {lo} and {hi}")
    return int(n)


def _id_list(value: Any, name: str = "ids") -> list[str]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(i, str) for i in items):
        raise ServiceError(proto.BAD_PARAMS, f"{name} must be an id or a list of ids")
    if len(items) > MAX_GET_IDS:
        raise ServiceError(proto.BAD_PARAMS, f"at most {MAX_GET_IDS} ids at once")
    return list(dict.fromkeys(items))
