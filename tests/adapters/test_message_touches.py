"""`Message.touches`: what the agents' tool calls say about the files they touched (which
lines a read covered, an edit's new text), read from stores written the way OpenCode
1.18.33 and Copilot CLI 1.0.102 write them (tool inputs as in their tool schemas: OpenCode
``read`` {filePath, offset (1-indexed), limit}, Copilot ``view`` {path, view_range})."""

from __future__ import annotations

import json
from pathlib import Path

from support.copilot_home import REPO as CP_REPO
from support.copilot_home import CopilotHome
from support.opencode_db import REPO, OpenCodeDB, text, tool

from llmem_hooks.adapters import CopilotAdapter, OpenCodeAdapter
from llmem_hooks.adapters.base import patch_touches
from llmem_hooks.events import FileTouch, Message

PATCH = """*** Begin Patch
*** Update File: src/net/retry.py
@@ def retry(fn):
-    for i in range(3):
+    for i in range(MAX_RETRIES):
+        log.debug("try %d", i)
*** Add File: src/net/new.py
+x = 1
*** Delete File: src/old.py
*** End Patch"""


def test_opencode_reads_edits_and_patches_give_their_lines_and_text(tmp_path: Path) -> None:
    db = OpenCodeDB(tmp_path / "opencode.db")
    sid = db.session()
    u = db.user(sid, "look at the retry code")
    db.assistant(
        sid,
        u,
        tool("read", filePath=f"{REPO}/src/net/retry.py", offset=10, limit=20),
        tool("read", filePath=f"{REPO}/src/net/retry.py"),  # the whole file: no range
        tool("read", filePath=f"{REPO}/README.md", offset=5),  # default limit 2000
        tool("read", filePath=f"{REPO}/odd.py", offset="ten", limit=True),  # odd: no range
        tool("edit", filePath=f"{REPO}/src/app.py", oldString="i <= n", newString="i < n"),
        tool("write", filePath=f"{REPO}/new.txt", content="x\n" * 50),
        tool("apply_patch", patchText=PATCH),
        tool("read", status="error", filePath=f"{REPO}/missing.py", offset=1, limit=5),
        tool("grep", pattern="TODO", path=f"{REPO}/src"),
        {"type": "file", "filename": "spec.md", "source": {"path": f"{REPO}/spec.md"}},
        finish="tool-calls",
    )
    db.assistant(sid, u, text("The limit is MAX_RETRIES."))
    with OpenCodeAdapter(db.path) as a:
        msgs = a.get_messages(sid)
    touches = msgs[1].touches
    assert touches == (
        FileTouch(f"{REPO}/src/net/retry.py", "read", 10, 29),
        FileTouch(f"{REPO}/src/net/retry.py", "read"),
        FileTouch(f"{REPO}/README.md", "read", 5, 2004),
        FileTouch(f"{REPO}/odd.py", "read"),
        FileTouch(f"{REPO}/src/app.py", "edit", text="i < n"),
        FileTouch(f"{REPO}/new.txt", "write"),
        FileTouch(
            "src/net/retry.py",
            "edit",
            text='    for i in range(MAX_RETRIES):\n        log.debug("try %d", i)',
        ),
        FileTouch("src/net/new.py", "write"),
        FileTouch("src/old.py", "edit"),
        FileTouch(f"{REPO}/spec.md", "attach"),
    )
    # ``files`` is as before (the resume pack's list), the failed read included.
    assert f"{REPO}/missing.py" in msgs[1].files
    assert msgs[0].touches == () and msgs[2].touches == ()
    db.close()


def test_copilot_view_ranges_edits_creates_and_attachments(tmp_path: Path) -> None:
    home = CopilotHome(tmp_path / "copilot")
    s = home.session()
    s.user(
        "what does this do?",
        attachments=[{"type": "file", "path": f"{CP_REPO}/src/net/retry.py", "displayName": "r"}],
    )
    s.turn_start(0)
    calls = [
        ("view", {"path": f"{CP_REPO}/src/net/retry.py", "view_range": [3, 8]}),
        ("view", {"path": f"{CP_REPO}/src/net/retry.py", "view_range": [40, -1]}),
        ("view", {"path": f"{CP_REPO}/README.md"}),
        ("view", {"path": f"{CP_REPO}/bad.py", "view_range": [9, 2]}),  # backwards: no range
        ("edit", {"path": f"{CP_REPO}/src/app.py", "old_str": "a", "new_str": "MAX = 5"}),
        ("create", {"path": f"{CP_REPO}/new.py", "file_text": "print(1)\n"}),
        ("grep", {"pattern": "TODO", "path": f"{CP_REPO}/src"}),
        ("bash", {"command": "cat src/net/retry.py", "description": "show"}),
        ("view", {"path": f"{CP_REPO}/gone.py", "view_range": [1, 5]}),  # fails below
    ]
    # Copilot may write the arguments as a JSON string; both shapes are read.
    shaped = [(n, json.dumps(a) if n == "edit" else a) for n, a in calls]
    _, ids = s.assistant("", shaped)
    for cid, (name, args) in zip(ids, calls, strict=True):
        s.tool_run(cid, name, args, success=not args.get("path", "").endswith("gone.py"))
    s.turn_end(0)
    s.turn_start(1)
    s.assistant("Done.")
    s.turn_end(1)
    with CopilotAdapter(home.root) as a:
        msgs: list[Message] = a.get_messages(s.id)
    user, tools = msgs[0], msgs[1]
    assert user.touches == (FileTouch(f"{CP_REPO}/src/net/retry.py", "attach"),)
    assert tools.touches == (
        FileTouch(f"{CP_REPO}/src/net/retry.py", "read", 3, 8),
        FileTouch(f"{CP_REPO}/src/net/retry.py", "read", 40, None),
        FileTouch(f"{CP_REPO}/README.md", "read"),
        FileTouch(f"{CP_REPO}/bad.py", "read"),
        FileTouch(f"{CP_REPO}/src/app.py", "edit", text="MAX = 5"),
        FileTouch(f"{CP_REPO}/new.py", "write"),
    )


def test_patch_touches_are_one_per_hunk_with_the_added_lines() -> None:
    two = PATCH.replace("*** Add File", "@@ later\n+MAX_RETRIES = 5\n*** Add File")
    got = patch_touches(two)
    assert [t.path for t in got] == [
        "src/net/retry.py",
        "src/net/retry.py",
        "src/net/new.py",
        "src/old.py",
    ]
    assert got[1].text == "MAX_RETRIES = 5"
    assert patch_touches("no patch here") == []


def test_a_touch_never_holds_a_huge_text_or_an_unencodable_path() -> None:
    from llmem_hooks.adapters.base import file_touch
    from llmem_hooks.events import MAX_TOUCH_TEXT

    assert file_touch("/r/a.py", "edit", text="x" * (MAX_TOUCH_TEXT + 1)) == FileTouch(
        "/r/a.py", "edit"
    )
    assert file_touch("", "read") is None and file_touch(None) is None and file_touch(7) is None
    assert file_touch("/r/a.py", "read", 0, 5) == FileTouch("/r/a.py", "read")
    assert file_touch("/r/a.py", "read", 2.0, 4) == FileTouch("/r/a.py", "read", 2, 4)
    touch = file_touch("/r/\ud83d.py", "read")
    assert touch is not None and touch.path == "/r/\ufffd.py"


def test_odd_tool_inputs_cost_only_their_touch(tmp_path: Path) -> None:
    """Shapes no agent writes (a model can put anything in a tool call's input): the
    message and its other touches are kept."""
    db = OpenCodeDB(tmp_path / "opencode.db")
    sid = db.session()
    u = db.user(sid, "go")
    db.assistant(
        sid,
        u,
        tool("multiedit", filePath=f"{REPO}/a.py", edits=5),
        tool("multiedit", filePath=f"{REPO}/b.py", edits=[{"newString": "B = 2"}, "x", None]),
        tool("read", filePath=["not", "a", "path"], offset=1),
        tool("read", filePath=f"{REPO}/c.py", offset=10**12, limit=5),
        tool("edit", filePath=f"{REPO}/d.py", newString={"not": "text"}),
        tool("apply_patch", patchText=7),
        text("done"),
    )
    with OpenCodeAdapter(db.path) as a:
        (msg,) = a.get_messages(sid)[1:]
    assert msg.touches == (
        FileTouch(f"{REPO}/a.py", "edit"),
        FileTouch(f"{REPO}/b.py", "edit", text="B = 2"),
        FileTouch(f"{REPO}/c.py", "read"),
        FileTouch(f"{REPO}/d.py", "edit"),
    )
    db.close()


def test_odd_copilot_arguments_give_no_range_and_no_crash() -> None:
    from llmem_hooks.adapters.copilot_tools import tool_touches

    assert tool_touches("view", {"path": "/r/a.py", "view_range": [True, 5]}) == [
        FileTouch("/r/a.py", "read")
    ]
    assert tool_touches("view", {"path": "/r/a.py", "view_range": ["1", "2", "3"]}) == [
        FileTouch("/r/a.py", "read")
    ]
    assert tool_touches("edit", {"path": "/r/a.py", "new_str": ["x"]}) == [
        FileTouch("/r/a.py", "edit")
    ]
    assert tool_touches("view", "not json") == [] and tool_touches("view", None) == []
    assert tool_touches("grep", {"path": "/r/src", "pattern": "x"}) == []
    assert tool_touches("apply_patch", PATCH)[0].path == "src/net/retry.py"
