"""The team hub: one PostgreSQL database a team shares (docs/team.md).

The only code that talks to PostgreSQL; psycopg is imported lazily so the base install
works without the ``team`` extra."""

from .hub import Hub
from .records import HubMemory, Mutation, PushOutcome

__all__ = ["Hub", "HubMemory", "Mutation", "PushOutcome"]
