"""Odd input on the query socket and the MCP server (issue 18, item 12): a lone UTF-16
surrogate, a NUL in a directory, a protocol version that only compares equal to 1.
Each gets a clear error reply (socket) or an error result (MCP), never ``internal`` or
silence. Real socket, real ``llmem-hooks mcp`` subprocess."""

from __future__ import annotations

import json
import select
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmem_hooks.service import protocol as proto
from llmem_hooks.service.operations import QueryService
from llmem_hooks.service.server import ServiceServer
from llmem_hooks.store import MemoryStore

EXE = Path(sys.executable).with_name("llmem-hooks")


@pytest.fixture
def sock_path(store: MemoryStore, llmem_home: Path) -> Iterator[Path]:
    store.add("fact", "The staging deploy uses make ship", dedupe=False)
    service = QueryService(store, {"ollama": {"enabled": False}})
    with ServiceServer(service, proto.socket_path(llmem_home)) as srv:
        yield srv.path
    service.close()


def _ask(path: Path, line: bytes) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        sock.connect(str(path))
        sock.sendall(line + b"\n")
        buf = b""
        while b"\n" not in buf:
            chunk = sock.recv(65536)
            if not chunk:
                break
            buf += chunk
    return json.loads(buf.split(b"\n")[0])


@pytest.mark.parametrize("version", ["true", "1.0", '"1"', "2", "null"])
def test_only_the_integer_1_is_version_1(sock_path: Path, version: str) -> None:
    reply = _ask(sock_path, f'{{"v":{version},"id":7,"method":"status"}}'.encode())
    assert reply["error"]["code"] == proto.BAD_VERSION, reply
    assert _ask(sock_path, b'{"v":1,"id":7,"method":"status"}')["result"]


@pytest.mark.parametrize(
    "params",
    [
        '{"query":"\\ud800 deploy"}',
        '{"query":"deploy \\udfff"}',
        '{"query":"deploy","type":"\\udc00"}',
    ],
)
def test_a_lone_surrogate_is_a_bad_request(sock_path: Path, params: str) -> None:
    reply = _ask(sock_path, f'{{"v":1,"id":3,"method":"search","params":{params}}}'.encode())
    assert reply["error"]["code"] == proto.BAD_REQUEST, reply
    assert "surrogate" in reply["error"]["message"]
    # A proper pair (an emoji written as two escapes) is fine.
    ok = _ask(
        sock_path, b'{"v":1,"id":3,"method":"search","params":{"query":"deploy \\ud83c\\udf89"}}'
    )
    assert "result" in ok, ok


def test_a_lone_surrogate_in_the_recall_prompt(sock_path: Path) -> None:
    line = (
        b'{"v":1,"id":4,"method":"recall","params":'
        b'{"session_id":"s","prompt":"how do we deploy staging \\ud800 ship"}}'
    )
    reply = _ask(sock_path, line)
    assert reply["error"]["code"] == proto.BAD_REQUEST, reply


@pytest.mark.parametrize("field", ["directory", "project"])
def test_a_nul_in_a_directory_is_bad_params(sock_path: Path, field: str) -> None:
    for method, extra in (
        ("recall", {"session_id": "s", "prompt": "how do we deploy staging with make"}),
        ("search", {"query": "deploy"}),
        ("remember", {"content": "a fact"}),
    ):
        req = proto.request(method, {**extra, field: "/tmp/a\x00b"})
        reply = _ask(sock_path, json.dumps(req).encode())
        assert reply["error"]["code"] == proto.BAD_PARAMS, (method, reply)
        assert "NUL" in reply["error"]["message"]


def test_mcp_answers_a_lone_surrogate_with_an_error_result(tmp_path: Path) -> None:
    """The SDK would drop the whole line and answer nothing: the client waits forever."""
    proc = subprocess.Popen(
        [str(EXE), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    assert proc.stdin is not None and proc.stdout is not None

    def read() -> dict:
        """The next message; failing (not hanging) when none comes: the old server sent
        no reply at all to such a line."""
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        assert ready, "no reply from the MCP server"
        return json.loads(proc.stdout.readline())

    def send(msg: dict) -> None:
        assert proc.stdin is not None
        proc.stdin.write((json.dumps(msg) + "\n").encode())
        proc.stdin.flush()

    try:
        send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-03-26",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            }
        )
        assert read()["id"] == 1
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        for rid, args in (
            (2, {"query": "\ud800 deploy"}),
            (3, {"query": "deploy", "type": "\udfff"}),
        ):
            send(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "method": "tools/call",
                    "params": {"name": "memory_search", "arguments": args},
                }
            )
            reply = read()
            while "id" not in reply:  # a log notification
                reply = read()
            assert reply["id"] == rid and reply["result"]["isError"] is True, reply
            assert "surrogate" in reply["result"]["content"][0]["text"]
        send(
            {
                "jsonrpc": "2.0",
                "id": 4,
                "method": "tools/call",
                "params": {"name": "memory_get", "arguments": {"ids": ["\udc00abc"]}},
            }
        )
        reply = read()
        assert reply["id"] == 4 and reply["result"]["isError"] is True
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
        proc.stdout.close()
        if proc.stderr is not None:
            proc.stderr.close()


def test_a_missing_parameter_is_named_and_a_bug_is_not_bad_params(tmp_path: Path) -> None:
    """Required parameters are checked against the method's signature: a missing one is
    "bad params" naming it; a TypeError raised inside a method (a bug) is not turned
    into "bad params" and reaches the caller as what it is."""
    from llmem_hooks.service.operations import ServiceError

    class Buggy(QueryService):
        def status(self) -> dict[str, object]:
            raise TypeError("unsupported operand type(s)")

    with MemoryStore(tmp_path / "m.db") as store:
        service = Buggy(store, {"ollama": {"enabled": False}})
        with pytest.raises(ServiceError) as err:
            service.call("recall", {"session_id": "ses_1"})
        assert err.value.code == proto.BAD_PARAMS and "prompt" in str(err.value)
        with pytest.raises(TypeError, match="unsupported operand"):
            service.call("status", {})
