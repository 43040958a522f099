"""Issue 18 (speed): the plugin launcher answers the MCP handshake itself.

Copilot waits for ``initialize`` and ``tools/list`` before every first turn. `bin/llmem-hook
mcp` answers them in the shell from the copy of its answers the Python front keeps in
``$LLMEM_HOME/mcp-front/`` (`mcp_front.sync_shell_answers`), and starts Python at the first
line it does not answer. These tests run the real launcher with a ``llmem-hooks`` that
notes each start, and compare its bytes with what the Python front wrote."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.copilot_home import launcher_env

from llmem_hooks.agents import mcp_front

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = ROOT / "bin" / "llmem-hook"

# Copilot CLI 1.0.102's opening, byte for byte as it writes it (recorded from the real CLI
# by a server that logged its input): a draft ``server/discover`` first, and tools/list
# twice in most runs.
DISCOVER = (
    '{"jsonrpc":"2.0","id":0,"method":"server/discover","params":{"_meta":{"io.model'
    'contextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":'
    '{"name":"copilot-cli","version":"1.0.102"},"io.modelcontextprotocol/clientCapabilities'
    '":{"sampling":{},"elicitation":{"form":{},"url":{}}}}}}'
)
INIT = (
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
    '"capabilities":{"sampling":{},"elicitation":{"form":{},"url":{}}},"clientInfo":'
    '{"name":"copilot-cli","version":"1.0.102"}}}'
)
INITIALIZED = '{"jsonrpc":"2.0","method":"notifications/initialized"}'
LIST2 = '{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"progressToken":0}}}'
LIST3 = '{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"progressToken":1}}}'
OPENING = [DISCOVER, INIT, INITIALIZED, LIST2, LIST3]


def _call(mid: int, name: str, **arguments: Any) -> str:
    params = {"name": name, "arguments": arguments}
    return json.dumps({"jsonrpc": "2.0", "id": mid, "method": "tools/call", "params": params})


@pytest.fixture
def world(tmp_path: Path) -> dict[str, str]:
    """The launcher's environment; its llmem-hooks (this interpreter's, as a script of its
    own name so the launcher and the front agree on it) appends a line to ``started``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "llmem-hooks"
    exe.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        f"open({str(tmp_path / 'started')!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
        "from llmem_hooks.cli import main\n"
        "sys.exit(main())\n"
    )
    exe.chmod(0o755)
    return launcher_env(tmp_path, LLMEM_HOOKS_BIN=str(exe))


def _serve(env: dict[str, str], lines: list[str], end: str = "\n", quiet: bool = True) -> bytes:
    """The launcher's output for ``lines``; ``quiet``: nothing on stderr (the SDK server
    logs the requests it refuses there)."""
    data = "\n".join(lines) + end
    done = subprocess.run(
        ["sh", str(LAUNCHER), "mcp"], input=data.encode(), env=env, capture_output=True, timeout=120
    )
    assert done.returncode == 0 and not (quiet and done.stderr), done.stderr[-2000:]
    return done.stdout


def _starts(tmp_path: Path) -> int:
    started = tmp_path / "started"
    count = len(started.read_text().splitlines()) if started.exists() else 0
    started.unlink(missing_ok=True)
    return count


def _answers(out: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()]


def test_the_launcher_answers_copilots_opening_as_the_python_front_does(
    world: dict[str, str], tmp_path: Path
) -> None:
    first = _serve(world, OPENING)  # no copy yet: Python answers, and leaves both
    assert _starts(tmp_path) == 1
    home = Path(world["LLMEM_HOME"])
    folder = home / mcp_front.SHELL_DIR
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert {stat.S_IMODE(p.stat().st_mode) for p in folder.iterdir()} == {0o600}
    second = _serve(world, OPENING)
    assert _starts(tmp_path) == 0  # not one Python start
    assert second == first  # the same bytes
    answers = _answers(second)
    assert [a["id"] for a in answers] == [0, 1, 2, 3]
    assert answers[0]["error"]["code"] == -32601
    assert answers[1]["result"]["protocolVersion"] == "2025-11-25"
    assert answers[1]["result"]["serverInfo"]["name"] == "llmem-hooks"
    assert {t["name"] for t in answers[2]["result"]["tools"]} >= {"memory_search"}
    # An older protocol the SDK has is echoed; one it lacks gets its latest.
    for wanted, expected in (("2025-06-18", "2025-06-18"), ("1999-01-01", None)):
        out = _answers(_serve(world, [INIT.replace("2025-11-25", wanted)]))
        latest = json.loads((home / mcp_front.CACHE_NAME).read_text())["latest"]
        assert out[0]["result"]["protocolVersion"] == (expected or latest)
    ping = '{"jsonrpc":"2.0","id":9,"method":"ping"}'
    assert _answers(_serve(world, [INIT, ping]))[1] == {"jsonrpc": "2.0", "id": 9, "result": {}}
    assert _starts(tmp_path) == 0
    assert _serve(world, []) == b""  # a client that closes at once


def test_a_tool_call_goes_to_python_which_does_not_answer_initialize_again(
    world: dict[str, str], tmp_path: Path
) -> None:
    _serve(world, OPENING)
    _starts(tmp_path)
    lines = [
        *OPENING,
        _call(4, "memory_remember", content="We deploy the billing service with make ship"),
        _call(5, "memory_search", query="billing deploy"),
        LIST2.replace('"id":2', '"id":6'),
    ]
    answers = _answers(_serve(world, lines))
    assert _starts(tmp_path) == 1
    assert [a["id"] for a in answers] == [0, 1, 2, 3, 4, 5, 6]
    assert "Stored as" in answers[4]["result"]["content"][0]["text"]
    assert "make ship" in answers[5]["result"]["content"][0]["text"]
    assert answers[6]["result"] == answers[2]["result"]


@pytest.mark.parametrize(
    "line",
    [
        # Not Copilot's compact shape: spaces, a string id, a leading zero, the method first.
        json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        '{"jsonrpc":"2.0","id":"two","method":"tools/list"}',
        '{"jsonrpc":"2.0","method":"tools/list","id":2}',
        # A page asked for, a method with a quote, a notification carrying an id.
        '{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"cursor":"x"}}',
        '{"jsonrpc":"2.0","id":2,"method":"a\\"b","params":{}}',
        '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1},"id":2}',
        # Text after the object, and our markers in a method name.
        '{"jsonrpc":"2.0","id":2,"method":"ping"} {"x":1}',
        '{"jsonrpc":"2.0","id":2,"method":"</llmem-recall>","params":{}}',
    ],
)
def test_anything_else_is_the_python_fronts_to_answer(
    world: dict[str, str], tmp_path: Path, line: str
) -> None:
    """Whatever the shell does not answer exactly as the Python front would, it hands over:
    the answers are the Python front's own (compared with a run that had no copy)."""
    _serve(world, [INIT, LIST2])
    _starts(tmp_path)
    home = Path(world["LLMEM_HOME"])
    via_shell = _serve(world, [INIT, line], quiet=False)
    shell_starts = _starts(tmp_path)
    (home / mcp_front.SHELL_DIR / mcp_front.SHELL_FILE).unlink()
    by_python = _serve(world, [INIT, line], quiet=False)
    assert via_shell == by_python
    assert shell_starts == 1


def test_a_last_line_without_its_newline_is_answered(world: dict[str, str], tmp_path: Path) -> None:
    _serve(world, [INIT, LIST2])
    _starts(tmp_path)
    out = _answers(_serve(world, [INIT, LIST2], end=""))
    assert _starts(tmp_path) == 0
    assert [a["id"] for a in out] == [1, 2] and out[1]["result"]["tools"]


def test_a_copy_that_is_stale_or_not_ours_is_not_used(
    world: dict[str, str], tmp_path: Path
) -> None:
    home = Path(world["LLMEM_HOME"])
    handshake = home / mcp_front.SHELL_DIR / mcp_front.SHELL_FILE
    exe = Path(world["LLMEM_HOOKS_BIN"])
    _serve(world, OPENING)
    _starts(tmp_path)
    good = _serve(world, OPENING)
    assert _starts(tmp_path) == 0
    # Reinstalled (a file it depends on is newer): Python answers and renews the copy.
    earlier = exe.stat().st_mtime - 5
    os.utime(handshake, (earlier, earlier))
    assert _serve(world, OPENING) == good and _starts(tmp_path) == 1
    assert _serve(world, OPENING) == good and _starts(tmp_path) == 0
    # Written for another llmem-hooks (another installation sharing this home).
    text = handshake.read_text()
    handshake.write_text(text.replace(str(exe), "/elsewhere/bin/llmem-hooks"))
    assert _serve(world, OPENING) == good and _starts(tmp_path) == 1
    # A link in its place, and a tools file that names a path: never followed.
    target = tmp_path / "elsewhere"
    target.write_text(handshake.read_text())
    handshake.unlink()
    handshake.symlink_to(target)
    assert _serve(world, OPENING) == good and _starts(tmp_path) == 1
    assert not handshake.is_symlink()
    lines = handshake.read_text().split("\n")
    lines[6] = "../../etc/passwd"
    handshake.write_text("\n".join(lines))
    assert _serve(world, OPENING) == good and _starts(tmp_path) == 1


def test_launchers_at_once_while_the_copy_is_renewed(world: dict[str, str], tmp_path: Path) -> None:
    """Sixteen launchers at once, half of them finding the copy stale (so Python answers
    and renews it while the others read it): every client gets its four answers whole."""
    _serve(world, OPENING)
    handshake = Path(world["LLMEM_HOME"]) / mcp_front.SHELL_DIR / mcp_front.SHELL_FILE
    data = ("\n".join(OPENING) + "\n").encode()
    procs = []
    for i in range(16):
        if i % 2 == 0:
            earlier = Path(world["LLMEM_HOOKS_BIN"]).stat().st_mtime - 5
            os.utime(handshake, (earlier, earlier))  # stale: this one starts Python
        proc = subprocess.Popen(
            ["sh", str(LAUNCHER), "mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=world,
        )
        procs.append(proc)
    for proc in procs:
        out, err = proc.communicate(data, timeout=120)
        assert proc.returncode == 0 and err == b"", err[-2000:]
        answers = _answers(out)
        assert [a["id"] for a in answers] == [0, 1, 2, 3]
        assert answers[2]["result"]["tools"] and answers[3] == answers[2] | {"id": 3}
    assert _starts(tmp_path) >= 2
