"""Fixtures for the OpenCode and Copilot CLI tests (helpers in ``oc_harness.py`` and
``copilot_harness.py``).

* ``opencode_bin``: ``opencode-ai`` installed into ``build/npm/`` once (reused afterwards).
* ``opencode_config_template``: the config dir with ``@opencode-ai/plugin`` pre-installed.
* ``fake_llm``: the fake OpenAI-compatible provider on 127.0.0.1 (daemon thread).
* ``make_opencode_env`` / ``oc_env`` (one per module): isolated worlds, torn down at the end.
* ``copilot_bin``: ``@github/copilot`` installed into ``build/npm/`` once (reused afterwards).
* ``make_copilot_env`` / ``cp_env`` (one per module): isolated Copilot CLI worlds.

Markers: ``e2e`` (the proof tests; they need the sidecar), ``opencode`` (needs the
OpenCode binary or the plugin's npm toolchain) and ``copilot`` (needs the Copilot CLI
binary). ``pytest -m "not e2e and not opencode and not copilot"`` deselects them all; what
they need comes from the npm registry once, and they SKIP (with the reason) when it cannot
be reached.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from copilot_harness import CopilotEnv, ensure_copilot
from fake_openai import FakeOpenAI
from oc_harness import OpenCodeEnv, SidecarProcess, ensure_config_template, ensure_opencode


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "e2e: end-to-end tests driving a real OpenCode with the llmem-hooks sidecar"
    )
    config.addinivalue_line("markers", "opencode: needs the OpenCode binary (npm opencode-ai)")
    config.addinivalue_line(
        "markers", "copilot: needs the GitHub Copilot CLI binary (npm @github/copilot)"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that use the plugin's npm toolchain count as ``opencode`` tests, so the marker
    expression above deselects every test that needs npm."""
    for item in items:
        if "plugin_toolchain" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.opencode)


@pytest.fixture(scope="session")
def opencode_bin() -> Path:
    return ensure_opencode()


@pytest.fixture(scope="session")
def opencode_config_template(opencode_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ensure_config_template(opencode_bin, tmp_path_factory.mktemp("oc-template"))


@pytest.fixture(scope="session")
def fake_llm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeOpenAI]:
    server = FakeOpenAI(tmp_path_factory.mktemp("fake-llm") / "requests.jsonl").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def make_opencode_env(
    opencode_bin: Path,
    opencode_config_template: Path,
    fake_llm: FakeOpenAI,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., OpenCodeEnv]]:
    """Factory for isolated worlds; every world is torn down at the end of the session
    (or earlier with ``world.close()``)."""
    made: list[OpenCodeEnv] = []

    def make(autostart: bool = False) -> OpenCodeEnv:
        world = OpenCodeEnv(
            tmp_path_factory.mktemp("oc"),
            opencode_bin,
            opencode_config_template,
            fake_llm,
            autostart=autostart,
        )
        made.append(world)
        return world

    try:
        yield make
    finally:
        for world in made:
            world.close()


@pytest.fixture(scope="module")
def oc_env(make_opencode_env: Callable[..., OpenCodeEnv]) -> Iterator[OpenCodeEnv]:
    """One world per test module (sessions are told apart by their ids)."""
    world = make_opencode_env()
    try:
        yield world
    finally:
        world.close()


@pytest.fixture(scope="session")
def copilot_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ensure_copilot(tmp_path_factory.mktemp("copilot-install"))


@pytest.fixture(scope="session")
def make_copilot_env(
    copilot_bin: Path, fake_llm: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., CopilotEnv]]:
    """Factory for isolated Copilot worlds (on top of an OpenCode world with ``base``);
    every world is torn down at the end of the session (or earlier with ``close()``)."""
    made: list[CopilotEnv] = []

    def make(base: OpenCodeEnv | None = None) -> CopilotEnv:
        root = base.root if base is not None else tmp_path_factory.mktemp("cp")
        world = CopilotEnv(root, copilot_bin, fake_llm, base=base)
        made.append(world)
        return world

    try:
        yield make
    finally:
        for world in made:
            world.close()


@pytest.fixture(scope="module")
def cp_env(make_copilot_env: Callable[..., CopilotEnv]) -> Iterator[CopilotEnv]:
    """One Copilot world per test module (sessions are told apart by their ids)."""
    world = make_copilot_env()
    try:
        yield world
    finally:
        world.close()


@pytest.fixture(scope="module")
def oc_sidecar(oc_env: OpenCodeEnv) -> Iterator[SidecarProcess]:
    """The module's sidecar, started once OpenCode has been used in this HOME (its data
    folder and opencode.db exist, as on any machine where OpenCode ran before)."""
    oc_env.opencode("session", "list")
    assert oc_env.opencode_db.exists()
    sc = oc_env.sidecar().start()
    try:
        yield sc
    finally:
        sc.stop()


@pytest.fixture(scope="module")
def cp_sidecar(cp_env: CopilotEnv) -> Iterator[SidecarProcess]:
    """The module's sidecar over its Copilot world."""
    sc = cp_env.sidecar().start()
    try:
        yield sc
    finally:
        sc.stop()
