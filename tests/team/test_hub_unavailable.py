"""A hub that is not there says so in one line (HubUnavailable, so the sidecar retries), a
refusal says HubDenied, and no message ever holds the password."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.pg import PgCluster, server_folder, start_cluster

from llmem_hooks.errors import HubDenied, HubUnavailable, ValidationError
from llmem_hooks.store.hub import Hub, HubMemory, PushOutcome
from llmem_hooks.store.hub.hub import MISSING_EXTRA, scrub

SECRET = "s3cret-Pa55word"
ROOT = Path(__file__).resolve().parents[2]


def _one_clean_line(message: str) -> None:
    assert SECRET not in message and "\n" not in message and message


@pytest.mark.parametrize(
    "dsn",
    [
        f"postgresql://alice:{SECRET}@/hub?host=/nonexistent/socket/dir",
        f"postgresql://alice:{SECRET}@127.0.0.1:1/hub",
        f"host=/nonexistent/dir user=alice password={SECRET} dbname=hub",
    ],
)
def test_an_absent_server_is_unavailable_in_one_line_without_the_password(dsn: str) -> None:
    with pytest.raises(HubUnavailable) as err:
        Hub.connect(dsn, timeout=2)
    _one_clean_line(str(err.value))


@pytest.mark.parametrize(
    "dsn",
    [
        f"postgresql://alice:{SECRET}@[bad",
        f"host=/tmp user=alice password={SECRET} nonsense_option=1",
        "   ",
    ],
)
def test_a_malformed_address_is_a_validation_error_without_the_password(dsn: str) -> None:
    with pytest.raises(ValidationError) as err:
        Hub.connect(dsn)
    _one_clean_line(str(err.value))


def test_scrub_hides_passwords_in_every_form() -> None:
    text = f"a postgresql://u:{SECRET}@h/db b password={SECRET} c password='{SECRET}'"
    assert SECRET not in scrub(text)
    assert SECRET not in scrub(f"error near {SECRET}", f"postgresql://u:{SECRET}@h/db")
    encoded = "p%40ss%3Aword"
    assert "p@ss:word" not in scrub("p@ss:word failed", f"postgresql://u:{encoded}@h/db")


def test_a_server_that_stops_mid_session_is_unavailable_then_back() -> None:
    with server_folder() as folder:
        _stop_and_start(start_cluster(folder))


def _stop_and_start(cluster: PgCluster) -> None:
    try:
        with Hub.connect(cluster.dsn()) as owner:
            owner.migrate(vectors=False)
            owner.create_role("stop_test_alice", SECRET)
        dsn = cluster.dsn("stop_test_alice", SECRET)
        item = HubMemory(
            id="m",
            project="k",
            type="fact",
            content="survives a restart",
            revision=1,
            updated_at="2026-11-27T10:00:00Z",
            device="d",
        )
        hub = Hub.connect(dsn)
        try:
            hub.register_project("k", "acme/app")
            cluster.stop()
            for call in (lambda: hub.push([item]), lambda: hub.pull("k", 0)):
                with pytest.raises(HubUnavailable) as err:
                    call()
                _one_clean_line(str(err.value))
        finally:
            hub.close()
        with pytest.raises(HubUnavailable) as err:
            Hub.connect(dsn, timeout=2)
        _one_clean_line(str(err.value))
        cluster.start()
        with Hub.connect(dsn) as hub:
            assert hub.push([item]) == [PushOutcome.APPLIED]
    finally:
        cluster.stop()


def test_a_wrong_password_is_denied_without_the_password(pg: PgCluster) -> None:
    for role in ("postgres", "nobody_here"):
        with pytest.raises(HubDenied) as err:
            Hub.connect(pg.dsn(role, SECRET))
        _one_clean_line(str(err.value))


def test_without_the_team_extra_one_clear_line() -> None:
    code = (
        "import sys; sys.modules['psycopg'] = None\n"
        "import llmem_hooks.store.hub as h\n"
        "from llmem_hooks.errors import LLMemError\n"
        "try:\n"
        "    h.Hub.connect('postgresql://a:b@/c?host=/tmp')\n"
        "except LLMemError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.stdout.strip() == MISSING_EXTRA, out.stderr


def test_importing_the_hub_does_not_import_psycopg() -> None:
    code = "import sys, llmem_hooks.store.hub; print('psycopg' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.stdout.strip() == "False", out.stderr
