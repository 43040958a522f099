"""Team memory: what moves between the local store and the team hub (docs/team.md)."""
