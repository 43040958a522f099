"""Which model-server URLs we may talk to, and how to print one safely.

Memories and transcripts must not leave the machine by accident, so a base URL is only
accepted when its host is loopback (``localhost``, ``127.0.0.0/8``, ``::1``) unless the
user set ``ollama.allow_remote: true``. The host is resolved and every address it maps to
must be loopback (a name that resolves elsewhere is refused: DNS rebinding). Redirects are
never followed (see `llmem_hooks.model.ollama`), so a loopback server cannot bounce a request to
a remote one. Credentials in a URL are stripped before it reaches a log or an error.
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit, urlunsplit

from .errors import ConfigError

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


def strip_credentials(url: str) -> str:
    """``url`` without ``user:password@`` (for logs and error messages)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<invalid url>"
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _is_loopback_ip(text: str) -> bool:
    try:
        return ipaddress.ip_address(text.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def is_loopback_host(host: str, resolve: bool = True) -> bool:
    """True if ``host`` is a loopback address, or a name whose every address is loopback."""
    host = host.strip("[]").lower()
    if _is_loopback_ip(host):
        return True
    if host not in LOOPBACK_NAMES and not host.endswith(".localhost"):
        return False
    if not resolve:
        return True
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return host in LOOPBACK_NAMES  # unresolvable here: the name itself is loopback
    return bool(infos) and all(_is_loopback_ip(str(info[4][0])) for info in infos)


def validate_base_url(url: str, allow_remote: bool = False) -> str:
    """``url`` without a trailing slash if we may use it; raises `ConfigError` otherwise."""
    shown = strip_credentials(url)
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises on a bad port
    except ValueError:
        raise ConfigError(f"ollama.base_url is not a valid URL: {shown}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"ollama.base_url must be an http(s) URL with a host: {shown}")
    if parts.query or parts.fragment:
        raise ConfigError(f"ollama.base_url must not have a query or fragment: {shown}")
    if not allow_remote and not is_loopback_host(parts.hostname):
        raise ConfigError(
            f"ollama.base_url {shown} is not on this machine; set ollama.allow_remote: true "
            "to send transcripts to it"
        )
    return url.rstrip("/")
