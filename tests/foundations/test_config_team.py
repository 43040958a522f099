"""``team:`` in config.yaml (TeamSettings): defaults, a DSN never holding a password (and
never echoed when refused), share types never naming episodes."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmem_hooks.config import Config, TeamSettings, load_config, load_settings
from llmem_hooks.errors import ConfigError
from llmem_hooks.paths import get_config_path


def write(text: str) -> Path:
    path = get_config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_no_team_by_default() -> None:
    team = Config().team
    assert team == TeamSettings()
    assert team.hub is None and team.interval_seconds == 30 and team.batch == 200
    assert team.share_types == ("decision", "procedure", "fact", "project_state")


def test_a_team_section_is_read_typed() -> None:
    write(
        "team:\n  hub: postgresql://alice@db.example.org:5432/llmem\n"
        "  share_types: [decision, procedure, decision]\n  batch: 50\n"
    )
    team = load_settings().team
    assert team.hub == "postgresql://alice@db.example.org:5432/llmem"
    assert team.share_types == ("decision", "procedure") and team.batch == 50
    # the dict form (the Copilot hook's JSON cache) types back the same way
    assert Config.from_mapping(load_config()).team == team


@pytest.mark.parametrize(
    "hub",
    [
        "postgresql://alice:s3cretPW@db.example.org/llmem",
        "postgres://alice:s3cretPW@/llmem?host=/run/pg",
        "postgresql://alice@db/llmem?sslmode=require&password=s3cretPW",
        "host=db user=alice password=s3cretPW dbname=llmem",
        "host=db user=alice PASSWORD = s3cretPW",
    ],
)
def test_a_dsn_with_a_password_is_refused_without_echoing_it(hub: str) -> None:
    write(f"team:\n  hub: '{hub}'\n")
    with pytest.raises(ConfigError) as err:
        load_config()
    assert "team.hub" in str(err.value) and "password" in str(err.value)
    assert "s3cretPW" not in str(err.value)


@pytest.mark.parametrize(
    ("section", "needle"),
    [
        ("  hub: 'not a dsn'\n", "team.hub"),
        ("  hub: ''\n", "team.hub"),
        ("  share_types: [decision, conversation]\n", "never shared"),
        ("  share_types: decision\n", "team.share_types"),
        ("  share_types: ['Decision; DROP']\n", "team.share_types"),
        ("  interval_seconds: 0\n", "team.interval_seconds"),
        ("  batch: 100000\n", "team.batch"),
    ],
)
def test_bad_team_values_are_one_clear_error(section: str, needle: str) -> None:
    write("team:\n" + section)
    with pytest.raises(ConfigError, match=needle):
        load_config()
