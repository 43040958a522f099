"""The query service on its Unix socket: the file's mode, the peer check, the protocol's
errors, slow and silent clients, a long LLMEM_HOME, the real sidecar serving it, and the
client's in-process fallback (docs/query-service.md)."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmem_hooks import MemoryStore
from llmem_hooks.cli import main
from llmem_hooks.service import client
from llmem_hooks.service import protocol as proto
from llmem_hooks.service.operations import QueryService
from llmem_hooks.service.server import ServiceServer

NO_MODEL = {"ollama": {"enabled": False}}


@pytest.fixture
def server(store: MemoryStore, llmem_home: Path) -> Iterator[ServiceServer]:
    service = QueryService(store, NO_MODEL, served_by="test-server")
    srv = ServiceServer(service, proto.socket_path(llmem_home), idle_timeout=1.0, line_timeout=0.5)
    with srv:
        yield srv
    service.close()


def _raw(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(3)
    with proto.address(path) as addr:
        sock.connect(addr)
    return sock


def _reply(sock: socket.socket) -> dict:
    buf = b""
    while b"\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            break
        buf += chunk
    return json.loads(buf.split(b"\n")[0])


def test_socket_is_private_and_answers(server: ServiceServer, llmem_home: Path) -> None:
    assert server.path == llmem_home / "query.sock"
    mode = os.stat(server.path).st_mode
    assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
    stored = client.call("remember", {"content": "The VPN config lives in ops/vpn/wg0.conf"})
    assert stored["status"] == "stored"
    out = client.call("recall", {"session_id": "ses_s", "prompt": "where is the vpn config?"})
    assert out["ids"] == [stored["id"]]
    assert client.call("status")["served_by"] == "test-server"


def test_protocol_errors_get_replies_never_a_crash(server: ServiceServer) -> None:
    sock = _raw(server.path)
    cases = [
        (b"{not json\n", "bad_request"),
        (b"[1, 2]\n", "bad_request"),
        (json.dumps({"v": 2, "id": 7, "method": "status"}).encode() + b"\n", "bad_version"),
        (json.dumps({"v": 1, "id": 8}).encode() + b"\n", "bad_request"),
        (json.dumps({"v": 1, "id": 9, "method": "drop_tables"}).encode() + b"\n", "unknown_method"),
        (
            json.dumps({"v": 1, "id": 10, "method": "get", "params": {"ids": 5}}).encode() + b"\n",
            "bad_params",
        ),
    ]
    for line, code in cases:  # one link, one reply per line, in order
        sock.sendall(line)
        reply = _reply(sock)
        assert reply["v"] == 1 and reply["error"]["code"] == code, line
    assert reply["id"] == 10
    sock.sendall(proto.encode(proto.request("status", rid="ok")))
    good = _reply(sock)
    assert good["id"] == "ok" and good["result"]["protocol"] == 1
    sock.close()


def test_an_oversized_line_is_refused_and_the_link_closed(server: ServiceServer) -> None:
    sock = _raw(server.path)
    sock.sendall(b"x" * (proto.MAX_LINE_BYTES + 10))
    reply = _reply(sock)
    assert reply["error"]["code"] == "too_large"
    assert sock.recv(10) == b""  # closed
    sock.close()
    assert client.call("status")["protocol"] == 1  # the server lives on


def test_silent_and_slow_clients_do_not_stall_others(server: ServiceServer) -> None:
    silent = _raw(server.path)  # connects, sends nothing
    slow = _raw(server.path)
    slow.sendall(b'{"v": 1, "method": ')  # half a line, never finished
    t0 = time.monotonic()
    assert client.call("status", timeout=1.0)["protocol"] == 1
    assert time.monotonic() - t0 < 0.5
    # and both are dropped after their timeouts (line 0.5 s, idle 1 s)
    slow.settimeout(3)
    silent.settimeout(3)
    assert slow.recv(10) == b""
    assert silent.recv(10) == b""
    slow.close()
    silent.close()


def test_another_uid_is_refused(store: MemoryStore, llmem_home: Path) -> None:
    service = QueryService(store, NO_MODEL)
    srv = ServiceServer(service, proto.socket_path(llmem_home), allowed_uid=os.getuid() + 1)
    with srv, pytest.raises(client.ServiceUnavailable):
        client.call("status", timeout=1.0)
    service.close()


def test_a_long_home_still_gets_its_socket(store: MemoryStore, tmp_path: Path) -> None:
    home = tmp_path / ("h" * 60) / ("o" * 60)
    home.mkdir(parents=True, mode=0o700)
    path = proto.socket_path(home)
    assert len(os.fsencode(path)) > proto.SUN_PATH_MAX and path.parent == home
    service = QueryService(store, NO_MODEL)
    with ServiceServer(service, path):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert client.call("status", home=home)["protocol"] == 1
    assert not path.exists()
    service.close()


def test_a_stale_socket_file_is_replaced_a_live_one_is_not(
    store: MemoryStore, llmem_home: Path
) -> None:
    service = QueryService(store, NO_MODEL)
    path = proto.socket_path(llmem_home)
    llmem_home.mkdir(parents=True, exist_ok=True)
    leftover = socket.socket(socket.AF_UNIX)
    leftover.bind(str(path))
    leftover.close()  # a crash left the file, nobody listens
    with ServiceServer(service, path):
        with pytest.raises(OSError, match="already answers"):
            ServiceServer(service, path).start()
        assert client.call("status")["protocol"] == 1
    service.close()


def test_fallback_when_no_sidecar(llmem_home: Path) -> None:
    with pytest.raises(client.ServiceUnavailable):
        client.query("status", fallback=False, config=NO_MODEL)
    st = client.query("status", config=NO_MODEL)
    assert st["served_by"] == "in-process"
    stored = client.query("remember", {"content": "Nightly backups go to s3://acme-backups"})
    assert stored["status"] == "stored"
    out = client.query(
        "recall", {"session_id": "ses_f", "prompt": "where do nightly backups go?"}, config=NO_MODEL
    )
    assert out["ids"] == [stored["id"]]
    with pytest.raises(client.ServiceCallError) as err:
        client.query("get", {"ids": []}, config=NO_MODEL)
    assert err.value.code == "bad_params"


def _env(home: Path, tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["LLMEM_HOME"] = str(home)
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg-data")
    env["COPILOT_HOME"] = str(tmp_path / "copilot")
    env.pop("OPENCODE_DB", None)
    return env


def test_the_real_sidecar_serves_it(llmem_home: Path, tmp_path: Path) -> None:
    llmem_home.mkdir(parents=True, mode=0o700)
    (llmem_home / "config.yaml").write_text("ollama:\n  enabled: false\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmem_hooks.cli", "run"],
        env=_env(llmem_home, tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        status = None
        while time.monotonic() < deadline and status is None:
            status = client.answers(llmem_home)
            time.sleep(0.05)
        assert status is not None, "the sidecar's query service never answered"
        assert status["served_by"] == "sidecar" and status["pid"] == proc.pid
        assert stat.S_IMODE(os.stat(llmem_home / "query.sock").st_mode) == 0o600
        stored = client.query("remember", {"content": "Error budgets are reviewed on Mondays"})
        out = client.query(
            "recall", {"session_id": "ses_real", "prompt": "when are error budgets reviewed?"}
        )
        assert out["ids"] == [stored["id"]]
        # the CLI goes through the same socket
        code = main(["recall", "--session", "ses_cli", "error budgets reviewed?", "--json"])
        assert code == 0
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
    assert proc.returncode == 0
    assert not (llmem_home / "query.sock").exists()
    assert "query service listening" in (llmem_home / "logs" / "sidecar.log").read_text()


def test_cli_recall(llmem_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (llmem_home).mkdir(parents=True, mode=0o700, exist_ok=True)
    (llmem_home / "config.yaml").write_text("ollama:\n  enabled: false\n")
    assert main(["store", "The on-call rota is in PagerDuty under team infra"]) == 0
    capsys.readouterr()
    assert main(["recall", "--session", "ses_c", "who is on call for infra?", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["ids"]) == 1 and "PagerDuty" in out["block"]
    assert main(["recall", "--session", "ses_c", "who is on call for infra?"]) == 0
    assert capsys.readouterr().out == ""  # given already: nothing
    assert main(["recall", "--session", "ses_c", "hi"]) == 0
    assert main(["recall", "--session", "", "x"]) == 2


def test_doctor_says_whether_the_query_service_answers(
    store: MemoryStore, llmem_home: Path
) -> None:
    from llmem_hooks.agents.doctor import diagnose

    def service_check() -> tuple[str, str]:
        check = next(c for c in diagnose({}) if c.name == "query_service")
        return check.status, check.detail

    status, detail = service_check()
    assert status == "warn" and "no sidecar answers" in detail
    service = QueryService(store, NO_MODEL, served_by="test-server")
    with ServiceServer(service, proto.socket_path(llmem_home)):
        status, detail = service_check()
        assert status == "ok" and "door for the Copilot plugin's launcher is not open" in detail
        from llmem_hooks import __version__
        from llmem_hooks.agents.hook_door import HookDoor

        door = HookDoor(service, llmem_home).start()
        try:
            opened = f"the sidecar answers (v{__version__}) and its door is open"
            assert service_check() == ("ok", opened)
        finally:
            door.stop()
    service.close()
