"""Machines of a team for the tests: each its own HOME, LLMEM_HOME and clone of one
repository, driving the real ``llmem-hooks`` CLI in a subprocess, as a person would."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

GIT = ["git", "-c", "user.email=dev@example.com", "-c", "user.name=dev"]


def make_origin(root: Path) -> Path:
    """The team's repository (one root commit: one project key on every clone)."""
    origin = root / "origin"
    origin.mkdir(parents=True)
    (origin / "README.md").write_text("# widgets\n")
    for args in (["init", "-q"], ["add", "README.md"], ["commit", "-q", "-m", "init"]):
        subprocess.run([*GIT, *args], cwd=origin, check=True, timeout=30, capture_output=True)
    subprocess.run(
        [*GIT, "remote", "add", "origin", "git@example.com:acme/widgets.git"],
        cwd=origin,
        check=True,
        timeout=30,
    )
    return origin


@dataclass
class Machine:
    """One developer's machine: ``cli`` runs ``llmem-hooks`` there (in the repo clone)."""

    name: str
    root: Path
    origin: Path
    extra_env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.home = self.root / "home"
        self.llmem_home = self.root / "llmem"
        self.repo = self.root / "repo"
        self.home.mkdir(parents=True, exist_ok=True)
        if not self.repo.exists():
            subprocess.run(
                ["git", "clone", "-q", str(self.origin), str(self.repo)],
                check=True,
                timeout=30,
                capture_output=True,
            )
            subprocess.run(
                [*GIT, "remote", "set-url", "origin", "git@example.com:acme/widgets.git"],
                cwd=self.repo,
                check=True,
                timeout=30,
            )

    @property
    def env(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("LLMEM_", "PG")) and k not in ("HOME",)
        }
        env.update(HOME=str(self.home), LLMEM_HOME=str(self.llmem_home), **self.extra_env)
        return env

    def cli(self, *args: str, check: bool = True, env: dict[str, str] | None = None) -> Any:
        proc = subprocess.run(
            [sys.executable, "-m", "llmem_hooks.cli", *args],
            cwd=self.repo,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=300,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"{self.name}: llmem-hooks {' '.join(args)} exited {proc.returncode}:\n"
                f"{proc.stdout}\n{proc.stderr}"
            )
        return proc

    def json(self, *args: str) -> Any:
        return json.loads(self.cli(*args, "--json").stdout)

    def memories(self, *filters: str) -> list[dict[str, Any]]:
        out = self.cli("list", "--json", "--limit", "100000", *filters).stdout
        return json.loads(out) if out.strip() else []

    def sync(self) -> dict[str, Any]:
        out: dict[str, Any] = self.json("team", "sync")
        return out

    def store(self, text: str, type: str = "decision", *more: str) -> str:
        out = self.cli("store", text, "--type", type, "--project", self.project(), *more, "--json")
        return str(json.loads(out.stdout)["id"])

    def project(self) -> str:
        from llmem_hooks.project import project_key

        return project_key(self.repo)

    def db(self) -> Path:
        return self.llmem_home / "memory.db"


def join_line(text: str) -> str:
    """The DSN in ``team members add --create``'s output (what the member runs)."""
    found = re.search(r"team join '([^']+)'", text)
    assert found, text
    return found.group(1)
