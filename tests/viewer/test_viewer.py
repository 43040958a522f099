"""`llmem-hooks ui` and `llmem-hooks report --html`: a real server subprocess on
127.0.0.1 over a real seeded store, spoken to over real sockets (docs/viewer.md).

Security first (Host check against DNS rebinding, the token on every route, POST-only
JSON changes, CSP, escaping of a memory that holds markup), then the API (counts by
project and type, provenance with the source episode, the retriever's search, edit /
forget / restore, the dream report, model usage), then the static report file.
"""

from __future__ import annotations

import json
import re
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.viewer import DREAM_HTML, XSS, ViewerProcess, api, env_for, seed

from llmem_hooks.store import MemoryStore


@pytest.fixture(scope="module")
def world(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ViewerProcess, dict[str, str], Path]]:
    base = tmp_path_factory.mktemp("viewer")
    home = base / "llmem"
    ids = seed(home)
    viewer = ViewerProcess(env_for(home, base), "--idle-exit", "300")
    yield viewer, ids, home
    assert viewer.close() == 0  # SIGTERM: a clean stop


def get(viewer: ViewerProcess, path: str, **headers: str) -> httpx.Response:
    with httpx.Client(base_url=viewer.base, timeout=10) as client:
        return client.get(path, headers=headers)


# -- security --------------------------------------------------------------------------------
def test_page_has_a_strict_csp_and_no_outside_urls(world) -> None:
    viewer, _, _ = world
    r = get(viewer, f"/?token={viewer.token}")
    assert r.status_code == 200
    csp = r.headers["content-security-policy"]
    nonce = re.search(r"script-src 'nonce-([^']+)'", csp).group(1)  # type: ignore[union-attr]
    assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
    assert f'<script nonce="{nonce}">' in r.text
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["referrer-policy"] == "no-referrer"
    assert r.headers["cache-control"] == "no-store"
    assert re.findall(r"https?://", r.text) == []  # no CDN, nothing from elsewhere
    assert "innerHTML" not in r.text  # the script builds the page with textContent only


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:{port}", "127.0.0.1.evil.example:{port}", "127.0.0.1:1"]
)
def test_other_hosts_are_refused(world, host: str) -> None:
    viewer, _, _ = world
    r = get(viewer, f"/?token={viewer.token}", Host=host.format(port=viewer.port))
    assert r.status_code == 421
    assert "llmem" not in r.text.lower() or "127.0.0.1" in r.text  # an error, not the page


def test_localhost_by_name_is_allowed(world) -> None:
    viewer, _, _ = world
    assert (
        get(viewer, f"/?token={viewer.token}", Host=f"localhost:{viewer.port}").status_code == 200
    )


@pytest.mark.parametrize(
    "path", ["/", "/api/overview", "/api/search?q=deploy", "/api/memory?id=x", "/dream-report"]
)
def test_every_route_needs_the_token(world, path: str) -> None:
    viewer, _, _ = world
    assert get(viewer, path).status_code == 403
    wrong = "x" * len(viewer.token)
    sep = "&" if "?" in path else "?"
    assert get(viewer, f"{path}{sep}token={wrong}").status_code == 403
    assert get(viewer, path, **{"X-LLMem-Token": wrong}).status_code == 403


def test_changes_are_post_only_with_the_token_in_a_header_and_json(world) -> None:
    viewer, ids, _ = world
    mid = ids["filler0"]
    with httpx.Client(base_url=viewer.base, timeout=10) as client:
        # the token in the URL is not enough for a change (a link or a form could carry it)
        r = client.post(f"/api/forget?token={viewer.token}", json={"id": mid})
        assert r.status_code == 403
        # a form post (what another site can send without a preflight)
        r = client.post("/api/forget", data={"id": mid}, headers={"X-LLMem-Token": viewer.token})
        assert r.status_code == 415
        r = client.post(
            "/api/forget",
            content=b"{not json",
            headers={"X-LLMem-Token": viewer.token, "Content-Type": "application/json"},
        )
        assert r.status_code == 400
        for method in ("PUT", "DELETE", "PATCH", "OPTIONS"):
            r = client.request(method, "/api/forget", headers={"X-LLMem-Token": viewer.token})
            assert r.status_code == 405, method
        # a GET never changes anything
        assert client.get(f"/api/forget?id={mid}&token={viewer.token}").status_code == 404
    status, out = api(viewer, f"/api/memory?id={mid}")
    assert status == 200 and out["memory"]["valid_until"] is None


def test_markup_in_a_memory_is_data_not_markup(world) -> None:
    viewer, ids, _ = world
    page = get(viewer, f"/?token={viewer.token}").text
    assert XSS not in page
    assert "<img" not in page and "onerror" in page  # only inside the escaped JSON
    assert page.count("<script") == 2  # the data block and the page's own script
    data = page.split('<script id="llmem-data" type="application/json">', 1)[1]
    data = data.split("</script>", 1)[0]
    contents = [m["content"] for m in json.loads(data)["overview"]["memories"]]
    assert XSS in contents  # the text itself survives, shown as text
    status, out = api(viewer, f"/api/memory?id={ids['xss']}")
    assert status == 200 and out["memory"]["content"] == XSS


# -- the API -------------------------------------------------------------------------------------
def test_overview_counts_inbox_usage_and_dream(world) -> None:
    viewer, ids, _ = world
    status, ov = api(viewer, "/api/overview")
    assert status == 200
    counts = {(c["project"], c["type"]): c["count"] for c in ov["counts"]}
    assert counts[("acme", "decision")] == 1
    assert counts[("acme", "conversation")] == 1
    assert counts[(None, "fact")] >= 4
    assert ("acme", "fact") not in counts  # the forgotten one is not live
    assert ids["forgotten"] in [m["id"] for m in ov["forgotten"]]
    assert [i["content"] for i in ov["inbox"]] == ["Maybe pin the sqlite version"]
    assert ov["usage"]["today"]["calls"] >= 3 and ov["usage"]["today"]["tokens"] >= 1500
    assert ov["usage"]["caps"]["day_tokens"] > 0
    assert ov["dream"]["exists"] is True


def test_provenance_names_the_session_agent_and_episode(world) -> None:
    viewer, ids, _ = world
    status, out = api(viewer, f"/api/memory?id={ids['learned'][:8]}")
    assert status == 200
    prov = out["provenance"]
    assert prov["session_id"] == "ses_view1"
    assert prov["session_agent"] == "opencode"
    assert prov["entered_by"] == "opencode"
    assert prov["source"] == "extract"
    assert prov["source_message_ids"] == ["msg_b"]
    assert prov["episode"]["id"] == ids["episode"]
    assert "make test-all" in prov["episode"]["content"]
    status, out = api(viewer, f"/api/memory?id={ids['deploy']}")
    assert out["provenance"]["episode"] is None  # stored by hand: no episode
    assert api(viewer, "/api/memory?id=ffffffff")[0] == 404


def test_search_is_the_retriever(world) -> None:
    viewer, ids, _ = world
    status, out = api(viewer, "/api/search?q=how%20do%20we%20deploy%20staging%3F")
    assert status == 200 and out["mode"] == "fts"
    assert out["hits"][0]["id"] == ids["deploy"]
    # typo-tolerant like `llmem-hooks search`
    status, out = api(viewer, "/api/search?q=ripgrepp")
    assert [h["id"] for h in out["hits"]][:1] == [ids["spare"]]
    status, out = api(viewer, "/api/search?q=deploy&project=other")
    assert ids["deploy"] not in [h["id"] for h in out["hits"]]
    assert api(viewer, "/api/search?q=")[0] == 400


def test_edit_forget_restore_reach_the_store(world) -> None:
    viewer, ids, home = world
    mid = ids["filler1"]
    status, out = api(
        viewer,
        "/api/edit",
        {
            "id": mid,
            "content": "Filler one, edited; token ghp_abcdefghijklmnopqrstuvwxyz0123456789",
            "tags": "a, b",
            "type": "event",
        },
    )
    assert status == 200, out
    assert out["memory"]["type"] == "event" and out["memory"]["tags"] == ["a", "b"]
    assert "ghp_" not in out["memory"]["content"]  # the store's redaction applies
    status, out = api(viewer, "/api/edit", {"id": mid, "type": "no such type!"})
    assert status == 400 and "type" in out["error"]
    status, out = api(viewer, "/api/forget", {"id": mid, "reason": "obsolete"})
    assert status == 200 and out["memory"]["invalidation_reason"] == "obsolete"
    assert api(viewer, "/api/forget", {"id": mid})[0] == 400  # already forgotten
    with MemoryStore(home / "memory.db", read_only=True) as st:
        row = st.get(mid)
        assert row is not None and row["valid_until"] is not None
    status, out = api(viewer, "/api/restore", {"id": mid})
    assert status == 200 and out["memory"]["valid_until"] is None
    assert api(viewer, "/api/restore", {"id": mid})[0] == 400
    with MemoryStore(home / "memory.db", read_only=True) as st:
        row = st.get(mid)
        assert row is not None and row["valid_until"] is None and "edited" in row["content"]


def test_dream_report_is_served_sandboxed(world) -> None:
    viewer, _, _ = world
    r = get(viewer, f"/dream-report?token={viewer.token}")
    assert r.status_code == 200 and "Dream run 7" in r.text
    assert r.headers["content-security-policy"].startswith("sandbox")
    assert "script-src" not in r.headers["content-security-policy"]


# -- the server's life ---------------------------------------------------------------------------
def test_idle_exit_stops_the_server(tmp_path: Path) -> None:
    home = tmp_path / "idle"
    seed(home)
    viewer = ViewerProcess(env_for(home, tmp_path), "--idle-exit", "1")
    started = time.monotonic()
    try:
        assert viewer.proc.wait(15) == 0
    finally:
        viewer.close()
    assert time.monotonic() - started < 10


# -- the report file -----------------------------------------------------------------------------
def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "llmem_hooks.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_report_html_is_one_self_contained_private_file(tmp_path: Path) -> None:
    home = tmp_path / "rep"
    ids = seed(home)
    out = tmp_path / "out" / "report.html"
    out.parent.mkdir()
    proc = _cli(env_for(home, tmp_path), "report", "--html", str(out))
    assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    page = out.read_text(encoding="utf-8")
    assert re.findall(r"https?://", page) == []
    assert '<meta http-equiv="Content-Security-Policy"' in page
    assert "connect-src &#x27;none&#x27;" in page  # the report calls nowhere
    assert XSS not in page and "<img" not in page
    data = page.split('<script id="llmem-data" type="application/json">', 1)[1]
    doc = json.loads(data.split("</script>", 1)[0])
    assert doc["mode"] == "report"
    assert doc["dream_html"] == DREAM_HTML
    prov = doc["overview"]["provenance"]
    assert prov[ids["learned"]]["episode"]["id"] == ids["episode"]
    assert ids["forgotten"] in prov  # the forgotten ones show their provenance too


def test_report_bad_path_is_one_line_exit_2(tmp_path: Path) -> None:
    home = tmp_path / "rep"
    seed(home)
    proc = _cli(env_for(home, tmp_path), "report", "--html", str(tmp_path / "nope" / "r.html"))
    assert proc.returncode == 2
    assert proc.stderr.startswith("error:") and proc.stderr.count("\n") == 1
    proc = _cli(env_for(home, tmp_path), "report")
    assert proc.returncode == 2
