"""How this machine reaches the team hub: the hub's address and the person's password.

``team join DSN`` (or ``team init``) splits what it is given: the address without a
password goes to ``<LLMEM_HOME>/team/hub.json``, the password to
``<LLMEM_HOME>/team/pgpass`` in libpq's own password-file format. Both are 0600 in a
0700 folder; every connection names the password file (libpq's ``passfile``), so the
password is never on a command line, in config.yaml, in a log line or in an error. A DSN
without a password works too: libpq then uses ``PGPASSWORD``, ``~/.pgpass``, a client
certificate or a local socket's peer authentication, all PostgreSQL's own.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, ValidationError
from ..paths import get_llmem_home, read_regular_file, write_private_file

if TYPE_CHECKING:
    from ..store.hub import Hub

TEAM_DIR = "team"
HUB_FILE = "hub.json"
PASS_FILE = "pgpass"
CONNECT_TIMEOUT_S = 5.0
_MAX_DSN = 2000


@dataclass(frozen=True)
class HubAddress:
    """The hub as stored on this machine: a DSN with no password in it, and the role."""

    dsn: str
    role: str

    def display(self) -> str:
        """The address for people: host, port, database and role (never a password)."""
        parts = _parse(self.dsn)
        host = parts.get("host") or "localhost"
        port = parts.get("port") or "5432"
        return f"{parts.get('user') or self.role}@{host}:{port}/{parts.get('dbname') or ''}"


def team_dir(home: Path | None = None) -> Path:
    return (home or get_llmem_home()) / TEAM_DIR


def _parse(dsn: str) -> dict[str, str]:
    """A DSN (URI or key=value) as libpq reads it; one clear error line when it is not one
    (psycopg's message can quote the whole string, password included, so it is not used)."""
    try:
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:  # pragma: no cover - the team extra is missing
        raise ConfigError("team features need: pip install 'llmem-hooks[team]'") from None
    if not dsn.strip() or len(dsn) > _MAX_DSN or "\x00" in dsn:
        raise ValidationError("not a PostgreSQL connection string")
    try:
        parsed = conninfo_to_dict(dsn)
    except Exception:
        raise ValidationError(
            "not a PostgreSQL connection string (use postgresql://ROLE@HOST:PORT/DB)"
        ) from None
    return {k: str(v) for k, v in parsed.items() if v is not None}


def _pgpass_field(value: str) -> str:
    return re.sub(r"([\\:])", r"\\\1", value)


def save(dsn: str, home: Path | None = None) -> HubAddress:
    """Keep ``dsn`` for later connections: its password (if any) in the 0600 password
    file, the rest in hub.json. Returns the stored address."""
    from psycopg.conninfo import make_conninfo

    parts = _parse(dsn)
    password = parts.pop("password", None)
    parts.pop("passfile", None)
    role = parts.get("user") or ""
    if not role:
        raise ValidationError("the connection string must name your role (ROLE@HOST)")
    folder = team_dir(home)
    if password is not None:
        if "\n" in password or "\r" in password:
            raise ValidationError("a password cannot hold a line break")
        line = "*:*:{}:{}:{}\n".format(
            _pgpass_field(parts.get("dbname") or "*"),
            _pgpass_field(role),
            _pgpass_field(password),
        )
        write_private_file(folder / PASS_FILE, line)
    stored = make_conninfo("", **parts)
    write_private_file(folder / HUB_FILE, json.dumps({"dsn": stored, "role": role}) + "\n")
    return HubAddress(stored, role)


def load(home: Path | None = None, configured: str | None = None) -> HubAddress | None:
    """The stored hub (``team join``), else config.yaml's ``team.hub`` (``configured``: a
    DSN without a password, for machines provisioned by a config file; libpq then finds
    the password in PGPASSFILE or ~/.pgpass, or uses a certificate), else None."""
    text = read_regular_file(team_dir(home) / HUB_FILE, limit=10_000)
    if text is None:
        if configured:
            return HubAddress(configured, _parse(configured).get("user", ""))
        return None
    try:
        data = json.loads(text)
        return HubAddress(str(data["dsn"]), str(data["role"]))
    except (ValueError, KeyError, TypeError):
        raise ConfigError(
            f"{team_dir(home) / HUB_FILE} is damaged; run `team join` again"
        ) from None


def forget(home: Path | None = None) -> bool:
    """Remove the stored hub and password (``team leave``)."""
    removed = False
    for name in (HUB_FILE, PASS_FILE):
        path = team_dir(home) / name
        if path.exists():
            path.unlink()
            removed = True
    return removed


def connection_string(address: HubAddress, home: Path | None = None) -> str:
    """The DSN to connect with: the stored one plus our password file when there is one."""
    from psycopg.conninfo import make_conninfo

    extra: dict[str, Any] = {}
    passfile = team_dir(home) / PASS_FILE
    if passfile.exists():
        extra["passfile"] = str(passfile)
    return make_conninfo(address.dsn, **extra)


def connect(
    address: HubAddress | str, home: Path | None = None, timeout: float = CONNECT_TIMEOUT_S
) -> Hub:
    """An open `Hub` for ``address`` (a stored one, or a DSN given on the command line)."""
    from ..store.hub import Hub

    dsn = connection_string(address, home) if isinstance(address, HubAddress) else address
    return Hub.connect(dsn, timeout=timeout)
