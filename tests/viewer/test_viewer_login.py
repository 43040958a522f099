"""The viewer's login and its refusals (docs/viewer.md, docs/security.md "Viewer login"),
against the real `llmem-hooks ui` subprocess over real sockets.

``ui --open`` hands the browser a one-time login code, never the long-lived token: a
browser's command line is readable by every local user (``/proc/PID/cmdline``). The fake
browser here is an executable named by ``$BROWSER`` (what `webbrowser` runs) that records
its argv. Then: a code works once; the session cookie it sets is HttpOnly, SameSite=Strict,
Path=/ and counts only from our own origin; refused requests do not keep the server alive;
too many query fields, deeply nested JSON and two Host headers get a 400 with a JSON error;
another local uid is refused even with the token (run as root: the client drops to nobody).
"""

from __future__ import annotations

import json
import os
import socket
import stat
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.viewer import ViewerProcess, env_for, seed

FAKE_BROWSER = """#!{python}
import json, os, sys
with open(os.environ["FAKE_BROWSER_LOG"], "a") as fh:
    fh.write(json.dumps(sys.argv) + "\\n")
"""


@pytest.fixture(scope="module")
def opened(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ViewerProcess, list[str]]]:
    """A viewer started with ``--open``, and the argv its browser was started with."""
    base = tmp_path_factory.mktemp("login")
    home = base / "llmem"
    seed(home)
    browser = base / "fake-browser"
    browser.write_text(FAKE_BROWSER.format(python=sys.executable))
    browser.chmod(browser.stat().st_mode | stat.S_IXUSR)
    record = base / "browser-argv.jsonl"
    env = env_for(home, base)
    env.update(BROWSER=str(browser), FAKE_BROWSER_LOG=str(record))
    env.pop("DISPLAY", None)
    env.pop("WAYLAND_DISPLAY", None)
    viewer = ViewerProcess(env, "--open", "--idle-exit", "300")
    try:
        deadline = time.monotonic() + 60
        while "\n" not in _text(record) and time.monotonic() < deadline:  # a whole line
            time.sleep(0.05)
        argv = json.loads(record.read_text().splitlines()[0])
        yield viewer, argv
    finally:
        assert viewer.close() == 0


def _client(viewer: ViewerProcess) -> httpx.Client:
    return httpx.Client(base_url=viewer.base, timeout=10)


def _raw(port: int, request: bytes) -> tuple[int, bytes]:
    """One request as raw bytes (what httpx would not send); (status, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def _login(viewer: ViewerProcess, url: str) -> httpx.Response:
    with _client(viewer) as client:
        return client.get(url.removeprefix(viewer.base))


def test_open_puts_a_one_time_code_on_the_command_line_not_the_token(opened) -> None:
    viewer, argv = opened
    assert len(argv) == 2 and viewer.token not in " ".join(argv)
    url = argv[1]
    assert url.startswith(f"{viewer.base}/login?code=")
    with open(f"/proc/{viewer.proc.pid}/cmdline", "rb") as fh:
        assert viewer.token.encode() not in fh.read()


def test_the_code_works_once_and_the_cookie_is_strict(opened) -> None:
    viewer, argv = opened
    cookie_name = f"llmem_viewer_{viewer.port}"
    with _client(viewer) as client:
        assert client.get("/api/overview").status_code == 403  # no cookie, no token
        r = client.get(argv[1].removeprefix(viewer.base))
        assert r.status_code == 303 and r.headers["location"] == "/"  # the clean URL
        set_cookie = r.headers["set-cookie"]
        assert set_cookie.startswith(f"{cookie_name}=")
        for attr in ("HttpOnly", "SameSite=Strict", "Path=/"):
            assert attr in set_cookie
        session = client.cookies[cookie_name]
        assert session != viewer.token and viewer.token not in set_cookie
        page = client.get("/")
        assert page.status_code == 200 and "llmem-data" in page.text
        assert client.get("/api/overview").json()["totals"]["active"] >= 1
        assert client.get("/dream-report").status_code == 200
    # the second use of the code is refused, and closes the session the first one opened
    # (someone else saw the code: whichever use came first, the session is not trusted)
    second = _login(viewer, argv[1])
    assert second.status_code == 403 and "used or has expired" in second.json()["error"]
    with _client(viewer) as client:
        client.cookies.set(cookie_name, session)
        assert client.get("/api/overview").status_code == 403


def test_unknown_codes_and_forged_cookies_are_refused(opened) -> None:
    viewer, _ = opened
    assert _login(viewer, "/login?code=" + "A" * 32).status_code == 403
    assert _login(viewer, "/login").status_code == 403
    with _client(viewer) as client:
        client.cookies.set(f"llmem_viewer_{viewer.port}", viewer.token)  # the token is no cookie
        assert client.get("/api/overview").status_code == 403


def test_printed_url_sets_the_cookie_and_a_cookie_counts_only_from_our_origin(opened) -> None:
    viewer, _ = opened
    with _client(viewer) as client:
        r = client.get(f"/?token={viewer.token}")
        assert r.status_code == 200 and "HttpOnly" in r.headers["set-cookie"]
        assert client.get("/api/overview").status_code == 200  # by the cookie alone
        assert client.get("/api/overview", headers={"Sec-Fetch-Site": "same-origin"}).is_success
        # a page on another port of 127.0.0.1 is "same-site": the browser sends our cookie
        for headers in (
            {"Origin": "http://127.0.0.1:1"},
            {"Origin": "null"},
            {"Sec-Fetch-Site": "same-site"},
            {"Sec-Fetch-Site": "cross-site"},
        ):
            assert client.get("/api/overview", headers=headers).status_code == 403, headers
        mid = client.get("/api/overview").json()["memories"][0]["id"]
        # a change by the cookie: JSON from our own origin passes, a form does not
        r = client.post("/api/forget", data={"id": mid})
        assert r.status_code == 415
        r = client.post("/api/forget", json={"id": mid}, headers={"Origin": "http://evil.example"})
        assert r.status_code == 403
        r = client.post(
            "/api/forget", json={"id": mid, "reason": "x"}, headers={"Origin": viewer.base}
        )
        assert r.status_code == 200
        assert client.post("/api/restore", json={"id": mid}).status_code == 200


def test_too_many_query_fields_and_deep_json_get_a_400(opened) -> None:
    viewer, _ = opened
    hdr = {"X-LLMem-Token": viewer.token}
    with _client(viewer) as client:
        many = "&".join(f"f{i}=x" for i in range(25))
        r = client.get(f"/api/search?q=deploy&{many}", headers=hdr)
        assert r.status_code == 400 and "query fields" in r.json()["error"]
        r = client.get(f"/login?{many}")
        assert r.status_code == 400 and r.json()["error"]
        for deep in ("[" * 100_000 + "]" * 100_000, '{"a":' * 60_000 + "1" + "}" * 60_000):
            r = client.post("/api/edit", content=deep.encode(),
                            headers={**hdr, "Content-Type": "application/json"})  # fmt: skip
            assert r.status_code == 400 and "nested" in r.json()["error"]
        assert client.get("/api/overview", headers=hdr).status_code == 200  # still up


def test_two_host_headers_are_refused(opened) -> None:
    viewer, _ = opened
    good = f"127.0.0.1:{viewer.port}"
    for hosts in ((good, "evil.example"), (good, good), ()):
        head = "".join(f"Host: {h}\r\n" for h in hosts)
        status, body = _raw(
            viewer.port,
            f"GET /api/overview HTTP/1.1\r\n{head}X-LLMem-Token: {viewer.token}\r\n"
            "Connection: close\r\n\r\n".encode(),
        )
        assert status == 400 and "Host" in json.loads(body)["error"], hosts


def test_refused_requests_do_not_keep_it_alive(tmp_path: Path) -> None:
    """Requests keep coming, all refused, every 0.2 s: the 2-second idle exit still comes."""
    home = tmp_path / "idle"
    seed(home)
    viewer = ViewerProcess(env_for(home, tmp_path), "--idle-exit", "2")
    bad = {
        "/api/overview": {"X-LLMem-Token": "x" * len(viewer.token)},
        f"/?token={viewer.token}": {"Host": "evil.example"},
        "/login?code=nope": {},
    }
    try:
        deadline = time.monotonic() + 60
        while viewer.proc.poll() is None and time.monotonic() < deadline:
            for path, headers in bad.items():
                try:
                    with _client(viewer) as client:
                        assert client.get(path, headers=headers).status_code in (403, 421)
                        assert client.request("PUT", "/").status_code == 405
                except httpx.TransportError:
                    break  # it stopped while we asked
            time.sleep(0.2)
        assert viewer.proc.poll() == 0
    finally:
        viewer.close()


def test_a_code_expires(tmp_path: Path) -> None:
    """The one-time code's lifetime (LOGIN_CODE_TTL_S), with the server in this process."""
    import threading

    from llmem_hooks.store import MemoryStore
    from llmem_hooks.viewer.data import ViewerData
    from llmem_hooks.viewer.server import LOGIN_CODE_TTL_S, ViewerServer

    assert LOGIN_CODE_TTL_S <= 60
    home = tmp_path / "exp"
    seed(home)
    with MemoryStore(home / "memory.db") as st:
        server = ViewerServer(ViewerData(st, {}), idle_exit_s=30)
        thread = threading.Thread(target=server.serve)
        thread.start()
        try:
            url = server.login_url()
            code = url.split("code=", 1)[1]
            server.codes[code] = (time.monotonic() - 1, None)  # its minute is over
            with httpx.Client(timeout=10) as client:
                assert client.get(url).status_code == 403
                fresh = client.get(server.login_url())
                assert fresh.status_code == 303
        finally:
            server.stop.set()
            thread.join(10)
    assert os.path.exists(home / "memory.db")


CLIENT = """
import json, sys, urllib.error, urllib.request
url, token = sys.argv[1], sys.argv[2]
req = urllib.request.Request(url, headers={"X-LLMem-Token": token})
try:
    with urllib.request.urlopen(req, timeout=10) as r:
        print(r.status)
except urllib.error.HTTPError as e:
    print(e.code, json.loads(e.read())["error"])
"""


SYSTEM_PYTHON = "/usr/bin/python3"  # one that another uid may run (the venv's may be private)


@pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.exists("/proc/net/tcp") or not os.path.exists(SYSTEM_PYTHON),
    reason="needs root (to be another uid), Linux's socket table and /usr/bin/python3",
)
def test_another_local_user_is_refused_even_with_the_token(opened) -> None:
    """What the issue saw: another uid pulled /api/overview. With the token it is refused."""
    import subprocess

    viewer, _ = opened
    args = [SYSTEM_PYTHON, "-I", "-c", CLIENT, f"{viewer.base}/api/overview", viewer.token]

    def as_uid(uid: int) -> str:
        def drop() -> None:
            os.setgid(uid)
            os.setuid(uid)

        proc = subprocess.run(
            args, capture_output=True, text=True, timeout=60, preexec_fn=drop, cwd="/"
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()

    assert as_uid(65534).startswith("403 this viewer answers only to the user who started it")
    assert as_uid(os.getuid()) == "200"


def _text(path: Path) -> str:
    """The file's text so far ('' before it exists)."""
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""
