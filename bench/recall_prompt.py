"""Per-prompt recall in the OpenCode plugin: its cost per prompt and the tokens it injects.

Usage: python bench/recall_prompt.py [--memories 10000] [--questions 240] [--per-session 8]

A store of ``--memories`` generated memories (bench/corpus.py; projects dropped, so every
memory is in scope for the bench's directory), a real ``llmem-hooks run`` serving the query
service on it, and the compiled plugin under Node (``bench/plugin_recall.mjs``) handling
one ``chat.message`` per prompt: the corpus's labelled questions, with a follow-up of the
kind a person types between them ("continue", "run the tests again") after every third
question, in sessions of ``--per-session`` prompts (recall never repeats a memory within a
session). Reported: the hook's time per prompt against a floor measured in the same run (the
same hook against an NDJSON server in the Node process that answers a fixed block at once),
and the tokens injected per prompt (block characters / 4, as the service counts): median,
p95 and the share of prompts that get nothing, for questions and follow-ups apart.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from corpus import generate, queries  # noqa: E402
from opencode_loop import compile_plugin, machine, pct  # noqa: E402

FOLLOW_UPS = [
    "continue",
    "thanks!",
    "ok, do it",
    "run the tests again",
    "looks good, commit it",
    "fix the lint errors",
    "now the other file",
    "go ahead",
    "what's next?",
    "can you explain that?",
    "try again",
    "show me the diff",
    "hmm, that didn't work",
    "yes please",
    "undo that change",
    "perfect, push it",
]


def prompt_list(memories: list[Any], count: int) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    for i, q in enumerate(queries(memories, count)):
        out.append({"text": q.text, "kind": "question"})
        if i % 3 == 2:
            out.append({"text": FOLLOW_UPS[(i // 3) % len(FOLLOW_UPS)], "kind": "follow-up"})
    return out


def build_home(home: Path, n: int) -> list[Any]:
    from llmem_hooks import MemoryStore

    memories = generate(n)
    home.mkdir(mode=0o700, parents=True)
    (home / "config.yaml").write_text("ollama:\n  enabled: false\nopencode:\n  enabled: false\n")
    records = [{**m.record, "project": None} for m in memories]
    with MemoryStore(home / "memory.db") as store:
        store.import_memories(records)
    return memories


def start_sidecar(home: Path) -> subprocess.Popen[bytes]:
    exe = Path(sys.executable).with_name("llmem-hooks")
    env = {**os.environ, "LLMEM_HOME": str(home), "HOME": str(home.parent)}
    env["XDG_DATA_HOME"] = str(home.parent / "data")  # no agent stores to watch
    env["COPILOT_HOME"] = str(home.parent / "copilot")
    proc = subprocess.Popen(
        [str(exe), "run"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    from llmem_hooks.service.client import answers

    deadline = time.monotonic() + 60
    while answers(home) is None:
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("the sidecar's query service did not answer")
        time.sleep(0.1)
    return proc


def summary(values: list[float]) -> str:
    return f"{pct(values, 50):.2f} | {pct(values, 95):.2f} | {max(values):.2f}"


def report(res: dict[str, Any], args: argparse.Namespace, took: float) -> str:
    svc = res["service"]
    lines = [
        f"Machine: {machine()}. {args.memories} memories, {len(svc)} prompts "
        f"({sum(r['kind'] == 'question' for r in svc)} questions), sessions of "
        f"{args.per_session}; {took:.0f} s in all.",
        "",
        "| chat.message hook | p50 ms | p95 ms | max ms |",
        "|---|---:|---:|---:|",
        f"| floor: NDJSON server in the Node process, fixed block | {summary(res['floor'])} |",
        f"| real sidecar (`llmem-hooks run`), recall on the store | "
        f"{summary([r['ms'] for r in svc])} |",
        "",
        "| prompts | count | tokens injected p50 | p95 | max | share with nothing |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for kind in ("question", "follow-up", None):
        rows = [r for r in svc if kind is None or r["kind"] == kind]
        tokens = [r["chars"] / 4 for r in rows]
        empty = sum(1 for r in rows if r["chars"] == 0) / len(rows)
        label = kind + "s" if kind else "all"
        lines.append(
            f"| {label} | {len(rows)} | {pct(tokens, 50):.0f} | {pct(tokens, 95):.0f} | "
            f"{max(tokens):.0f} | {empty:.0%} |"
        )
    lines.append("")
    lines.append(f"Recall calls that failed or timed out (plugin log): {res['problems']}.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--questions", type=int, default=240)
    ap.add_argument("--per-session", type=int, default=8)
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="llmem-recall-") as tmp:
        root = Path(tmp)
        home = root / "llmem"
        memories = build_home(home, args.memories)
        prompts = root / "prompts.json"
        prompts.write_text(json.dumps(prompt_list(memories, args.questions)))
        plugin = compile_plugin(root)
        scratch = root / "scratch"
        scratch.mkdir()
        from llmem_hooks.service.protocol import socket_path

        sidecar = start_sidecar(home)
        script = HERE / "plugin_recall.mjs"
        argv = [str(script), str(plugin), str(scratch), str(socket_path(home)), str(prompts)]
        try:
            proc = subprocess.run(
                ["node", *argv, str(args.per_session)],
                capture_output=True,
                text=True,
                timeout=1200,
                check=False,
            )
        finally:
            sidecar.terminate()
            sidecar.wait(20)
        if proc.returncode != 0:
            raise RuntimeError(f"plugin_recall.mjs failed:\n{proc.stdout}\n{proc.stderr}")
        res = json.loads(proc.stdout.strip().splitlines()[-1])
    print(report(res, args, time.monotonic() - t0))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
