"""`llmem-hooks embed`: give every memory stored without a vector its vector now, with
progress (the sidecar does the same in the background, 32 at a time, when the model
answers). For memories stored while the model was down, imported without vectors, or
episodes indexed by the one-time backfill."""

from __future__ import annotations

from typing import Annotated

import typer

from ..errors import LLMemError
from .quick import Invocation

BATCH = 64  # memories per request and per write transaction


def embed(
    ctx: typer.Context,
    limit: Annotated[
        int | None,
        typer.Option("--limit", "-n", min=1, help="At most this many memories (default: all)."),
    ] = None,
) -> None:
    """Embed the memories that have no vector yet (needs the configured model)."""
    from ..model.embed import embedder_from_config
    from ..progress import progress

    inv = Invocation.of(ctx)
    engine = embedder_from_config(inv.config(), interactive=True)
    if engine is None:
        raise LLMemError("no embedding model is configured or it does not answer (doctor)")
    done = 0
    try:
        with inv.open_store() as st:
            from ..store.vectors import count_missing_embeddings

            total = count_missing_embeddings(st.db)
            if limit is not None:
                total = min(total, limit)
            with progress("embedding memories", total=total) as bar:
                while done < total:
                    rows = st.missing_embeddings(min(BATCH, total - done))
                    if not rows:
                        break
                    vectors = engine.embed_batch([content for _, content in rows])
                    st.set_embeddings(list(zip((i for i, _ in rows), vectors, strict=True)))
                    done += len(rows)
                    bar.update(done, total)
    finally:
        engine.close()
    typer.echo(f"embedded {done} memories")
