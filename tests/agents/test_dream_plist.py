"""The launchd plist of ``install --service`` is well-formed XML that `plistlib` reads
back to the same command, schedule and LLMEM_HOME (a ``--`` inside its comment once made
it unreadable for launchd)."""

from __future__ import annotations

import plistlib
import xml.dom.minidom
from pathlib import Path

import pytest

from llmem_hooks.agents.schedule import MARKER, install_service, launchd_plist, uninstall_service
from llmem_hooks.errors import ValidationError

CMD = ["/opt/llmem --x/bin/llmem-hooks", "dream", "--apply", "--trigger", "timer"]


def test_plist_is_well_formed_and_reads_back(tmp_path: Path) -> None:
    home = tmp_path / "a&b <c> --d"
    body = launchd_plist(CMD, "*-*-* 04:30:00", home)
    xml.dom.minidom.parseString(body.encode())  # expat: a "--" in a comment fails here
    plist = plistlib.loads(body.encode())
    assert plist["ProgramArguments"] == CMD
    assert plist["StartCalendarInterval"] == {"Hour": 4, "Minute": 30}
    assert plist["EnvironmentVariables"] == {"LLMEM_HOME": str(home)}
    assert plist["StandardOutPath"] == str(home / "logs" / "dream.log")
    assert MARKER in body[:400]  # uninstall still knows the file as ours


def test_installed_plist_file_parses_and_uninstalls(llmem_home: Path) -> None:
    files = install_service("03:15", platform="darwin", command=CMD)
    with files[0].open("rb") as fh:
        assert plistlib.load(fh)["Label"] == "com.llmem-hooks.dream"
    assert uninstall_service(platform="darwin") == files


def test_a_control_character_in_the_home_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="LLMEM_HOME"):
        launchd_plist(CMD, "03:15", tmp_path / "bad\x01home")
