"""Evidence for memories about code: citations of a repository's lines, and checking them
against the working tree (docs/citations.md)."""
