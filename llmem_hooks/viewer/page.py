"""The viewer's one page: inline CSS and script, nothing from another host. The same
renderer makes the live page of `llmem-hooks ui` (search, edit, forget and restore call
the server's JSON API with the token) and the file of `llmem-hooks report --html` (the
data and every memory's provenance embedded; search answers questions from a search index
embedded beside the data (`search_index`, run by web/report_search.js); no buttons that
change anything).

Memories hold untrusted text (whatever a session said), so nothing from the data is ever
put into markup: the data travels as JSON inside a ``<script type="application/json">``
block (``<``, ``>`` and ``&`` escaped, so no text can close it), and the script builds the
page with ``textContent`` only (no ``innerHTML``). A Content-Security-Policy allows the
page's own script and style only (a nonce) and no other host.
"""

from __future__ import annotations

import functools
import html
import json
import secrets
from importlib import resources
from typing import Any

ASSETS = "llmem_hooks.viewer.web"  # viewer.css, viewer.js, report_search.js: inlined package data


@functools.cache
def _asset(name: str) -> str:
    return resources.files(ASSETS).joinpath(name).read_text(encoding="utf-8")


def _json_for_script(data: Any) -> str:
    """JSON that cannot end the ``<script>`` element it sits in, whatever the strings hold."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return (
        text.replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def content_security_policy(nonce: str, *, live: bool) -> str:
    """Only this page's own script and style; the live page may call its own server; the
    report calls nothing. A dream report shows in a sandboxed frame."""
    own = "'self'" if live else "'none'"
    # the report's dream frame (srcdoc) inherits this policy and brings its own <style>
    style = f"'nonce-{nonce}'" if live else "'unsafe-inline'"
    parts = [
        "default-src 'none'",
        f"script-src 'nonce-{nonce}'",
        f"style-src {style}",
        f"connect-src {own}",
        f"frame-src {own}",
        "img-src 'none'",
        "base-uri 'none'",
        "form-action 'none'",
    ]
    if live:
        parts.append("frame-ancestors 'none'")  # ignored in a <meta>, so only when served
    return "; ".join(parts)


def render_page(
    overview: dict[str, Any],
    *,
    live: bool,
    nonce: str | None = None,
    dream_html: str | None = None,
    search_index: dict[str, Any] | None = None,
) -> str:
    """The whole page. ``live``: the server's page (its API does the rest); otherwise
    the self-contained report (``dream_html``: the dream report to embed;
    ``search_index``: `search_index.build`'s index, which its search then answers from)."""
    nonce = nonce or secrets.token_urlsafe(16)
    data = {"mode": "live" if live else "report", "overview": overview}
    if not live and dream_html is not None:
        data["dream_html"] = dream_html
    csp = content_security_policy(nonce, live=live)
    meta = (
        "" if live else f'<meta http-equiv="Content-Security-Policy" content="{html.escape(csp)}">'
    )
    title = "llmem-hooks memories" + ("" if live else " (report)")
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f"{meta}"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{html.escape(title)}</title>"
        f'<style nonce="{nonce}">{_asset("viewer.css")}</style></head><body>'
        f'<header><h1>{html.escape(title)}</h1><span class="meta" id="generated"></span></header>'
        '<nav id="tabs"></nav>'
        '<main><aside id="side"></aside><div id="content"></div><div id="detail"></div></main>'
        f'<script id="llmem-data" type="application/json">{_json_for_script(data)}</script>'
        f"{_search_scripts(search_index, nonce) if not live else ''}"
        f'<script nonce="{nonce}">{_asset("viewer.js")}</script>'
        "</body></html>\n"
    )


def _search_scripts(index: dict[str, Any] | None, nonce: str) -> str:
    """The report's search index (escaped JSON, like the data) and the script that reads it."""
    if index is None:
        return ""
    return (
        f'<script id="llmem-search" type="application/json">{_json_for_script(index)}</script>'
        f'<script nonce="{nonce}">{_asset("report_search.js")}</script>'
    )
