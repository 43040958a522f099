"""``install --service``: run the dream cycle on a schedule without the sidecar.

Linux: a systemd user service + timer (``$XDG_CONFIG_HOME/systemd/user/``,
``llmem-hooks-dream.service`` / ``.timer``); macOS: a launchd agent
(``~/Library/LaunchAgents/com.llmem-hooks.dream.plist``). Both run
``<llmem-hooks> dream --apply --trigger timer`` with this LLMEM_HOME. The files are only
written (and removed by ``uninstall --service``): enabling them is one command we print,
never run, so nothing here touches the user's service manager.

The schedule is a systemd calendar expression (``dream.schedule``, default
``*-*-* 03:00:00``) checked by `config.check_schedule` before it reaches a unit: shell
and unit-file metacharacters are refused, as the reference's ``ValidateSchedule`` does.
Every word of the command must be plain too (no quote, backslash, ``$``, ``%``).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from xml.sax.saxutils import escape

from ..config import check_schedule
from ..errors import ValidationError
from ..paths import get_llmem_home
from .install import STATUS_REMOVED, _write_if_changed, sidecar_command

UNIT = "llmem-hooks-dream"
LAUNCHD_LABEL = "com.llmem-hooks.dream"
MARKER = "llmem-hooks dream cycle"  # in every file we write, so uninstall removes only ours
_UNSAFE_WORD = re.compile(r"[\"'\\$%`;\n\r\t\x00-\x1f]")

Report = Callable[[str], None]


def validate_schedule(schedule: str) -> bool:
    """True if ``schedule`` is a calendar expression without metacharacters."""
    try:
        check_schedule(schedule)
    except ValueError:
        return False
    return True


def dream_command() -> list[str]:
    """This installation's ``llmem-hooks`` (absolute), then the dream arguments."""
    return [*sidecar_command()[:-1], "dream", "--apply", "--trigger", "timer"]


def _unit_word(word: str, what: str) -> str:
    if _UNSAFE_WORD.search(word):
        raise ValidationError(
            f"{what} {word!r} holds a character a unit file would read as code"
            " (quote, backslash, $, %, control); install llmem-hooks at a plain path"
        )
    return f'"{word}"' if " " in word else word


def service_unit(command: Sequence[str], home: Path) -> str:
    """The systemd service: one run of the dream cycle (``Type=oneshot``)."""
    exec_start = " ".join(_unit_word(w, "command word") for w in command)
    env = _unit_word(f"LLMEM_HOME={home}", "LLMEM_HOME")
    return (
        f"# {MARKER} (written by llmem-hooks install --service)\n"
        "[Unit]\n"
        "Description=llmem-hooks dream cycle (merge, decay, link memories)\n\n"
        "[Service]\n"
        "Type=oneshot\n"
        f"Environment={env}\n"
        f"ExecStart={exec_start}\n"
        "Nice=10\n"
    )


def timer_unit(schedule: str) -> str:
    """The systemd timer (``Persistent``: a run missed while off happens at boot)."""
    try:
        schedule = check_schedule(schedule)
    except ValueError as exc:
        raise ValidationError(f"schedule: {exc}") from None
    return (
        f"# {MARKER} (written by llmem-hooks install --service)\n"
        "[Unit]\n"
        "Description=Run the llmem-hooks dream cycle on a schedule\n\n"
        "[Timer]\n"
        f"OnCalendar={schedule}\n"
        "Persistent=true\n"
        "RandomizedDelaySec=300\n\n"
        "[Install]\n"
        "WantedBy=timers.target\n"
    )


def _daily_time(schedule: str) -> tuple[int, int]:
    """(hour, minute) of a daily schedule (``*-*-* HH:MM[:SS]`` or ``HH:MM``): launchd
    has no calendar expressions, so only a daily time carries over."""
    m = re.fullmatch(r"(?:\*-\*-\*\s+)?(\d{1,2}):(\d{2})(?::\d{2})?", schedule.strip())
    if not m or int(m.group(1)) > 23 or int(m.group(2)) > 59:
        raise ValidationError(
            f"schedule {schedule!r}: on macOS use a daily time like '*-*-* 03:00:00'"
        )
    return int(m.group(1)), int(m.group(2))


def launchd_plist(command: Sequence[str], schedule: str, home: Path) -> str:
    try:
        schedule = check_schedule(schedule)
    except ValueError as exc:
        raise ValidationError(f"schedule: {exc}") from None
    hour, minute = _daily_time(schedule)
    for word in command:
        _unit_word(word, "command word")
    _unit_word(str(home), "LLMEM_HOME")  # a control character is not allowed in XML either
    args = "\n".join(f"    <string>{escape(w)}</string>" for w in command)
    log = escape(str(home / "logs" / "dream.log"))
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN"'
        ' "http://www.apple.com/DTDs/PropertyList-1.0.dtd">\n'
        # no "--" inside an XML comment: it would make the file not well-formed
        f"<!-- {MARKER} (written by llmem-hooks install, service option) -->\n"
        '<plist version="1.0">\n<dict>\n'
        f"  <key>Label</key><string>{LAUNCHD_LABEL}</string>\n"
        f"  <key>ProgramArguments</key>\n  <array>\n{args}\n  </array>\n"
        "  <key>EnvironmentVariables</key>\n  <dict>\n"
        f"    <key>LLMEM_HOME</key><string>{escape(str(home))}</string>\n  </dict>\n"
        "  <key>StartCalendarInterval</key>\n"
        f"  <dict><key>Hour</key><integer>{hour}</integer>"
        f"<key>Minute</key><integer>{minute}</integer></dict>\n"
        f"  <key>StandardOutPath</key><string>{log}</string>\n"
        f"  <key>StandardErrorPath</key><string>{log}</string>\n"
        "</dict>\n</plist>\n"
    )


def systemd_dir() -> Path:
    xdg = os.environ.get("XDG_CONFIG_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".config") / "systemd" / "user"


def launchd_dir() -> Path:
    return Path.home() / "Library" / "LaunchAgents"


def _files(platform: str) -> list[Path]:
    if platform == "darwin":
        return [launchd_dir() / f"{LAUNCHD_LABEL}.plist"]
    if platform.startswith("linux"):
        return [systemd_dir() / f"{UNIT}.service", systemd_dir() / f"{UNIT}.timer"]
    raise ValidationError(f"--service: no scheduler known for platform {platform!r}")


def install_service(
    schedule: str,
    *,
    platform: str | None = None,
    command: Sequence[str] | None = None,
    report: Report | None = None,
) -> list[Path]:
    """Write the unit files for this platform (everything is checked before anything is
    written); ``report`` gets one line per file and the command that enables them."""
    platform = platform or sys.platform
    home = get_llmem_home()
    cmd = list(command) if command else dream_command()
    files = _files(platform)
    if platform == "darwin":
        bodies = [launchd_plist(cmd, schedule, home)]
        enable = f"launchctl load -w {files[0]}"
    else:
        bodies = [service_unit(cmd, home), timer_unit(schedule)]
        enable = f"systemctl --user daemon-reload && systemctl --user enable --now {UNIT}.timer"
    for path, body in zip(files, bodies, strict=True):
        path.parent.mkdir(parents=True, exist_ok=True)
        status = _write_if_changed(path, body.encode(), private=False)
        if report is not None:
            report(f"{status} {path}")
    if report is not None:
        report(f"enable it with: {enable}")
    return files


def uninstall_service(*, platform: str | None = None, report: Report | None = None) -> list[Path]:
    """Remove the unit files we wrote (a file without our marker is left alone)."""
    removed: list[Path] = []
    for path in _files(platform or sys.platform):
        try:
            ours = MARKER in path.read_text(encoding="utf-8", errors="replace")[:400]
        except OSError:
            continue
        if ours:
            path.unlink()
            removed.append(path)
        elif report is not None:
            report(f"left {path} alone: it was not written by llmem-hooks")
    if report is not None:
        for path in removed:
            report(f"{STATUS_REMOVED} {path}")
        if not removed:
            report("nothing to remove: the dream service is not installed")
    return removed
