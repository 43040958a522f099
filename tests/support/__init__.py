"""Builders the tests and the benches share: real files and servers, not mocks.

* ``opencode_db``: an ``opencode.db`` written from OpenCode's own schema
  (``tests/fixtures/opencode_schema.sql``) with sessions, messages and parts.
* ``copilot_home``: a ``COPILOT_HOME`` with ``session-state/<uuid>/`` folders shaped like the
  recorded fixtures (``tests/fixtures/copilot/``).
* ``fake_ollama``: an HTTP fake of Ollama on 127.0.0.1 (generate, embed, tags, faults).

Import them as ``from support.opencode_db import OpenCodeDB``: pytest's default import
mode puts ``tests/`` (the folder of ``tests/conftest.py``, not a package) on ``sys.path``;
a bench adds ``<repo>/tests`` to ``sys.path`` itself before importing.
"""
