"""Learning what users say: precision and recall of the heuristic extractor on a labelled
corpus of user utterances (tests/fixtures/learning/{dev,held-out}.tsv).

Usage: python bench/learning.py [--split dev|held-out|all] [--show-misses] [--json]

Each line of a corpus file is ``label<TAB>utterance``: a memory type (fact, decision,
preference, procedure) for a statement meant to be kept, ``-`` for noise. An utterance is
sent as one user message, exactly as an agent stores it (OpenCode's quoted ``run``
argument keeps its quotes). It is *learned* when the extractor proposes at least one
memory. Precision: of the utterances learned, the share that are positives; recall: of the
positives, the share learned; type accuracy: of the positives learned, the share whose
first memory has the expected type. The dev half was used to write the rules; the
held-out half was written apart, in other words, and is what counts.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmem_hooks.events import Message  # noqa: E402
from llmem_hooks.extraction import HeuristicExtractor  # noqa: E402

CORPUS = ROOT / "tests" / "fixtures" / "learning"
SPLITS = ("dev", "held-out")


@dataclass(frozen=True)
class Utterance:
    label: str  # a memory type, or "-" for noise
    text: str

    @property
    def positive(self) -> bool:
        return self.label != "-"


def load(split: str) -> list[Utterance]:
    out: list[Utterance] = []
    for line in (CORPUS / f"{split}.tsv").read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        label, text = line.split("\t", 1)
        out.append(Utterance(label.strip(), text))
    return out


@dataclass
class Result:
    split: str
    n: int
    positives: int
    tp: int
    fp: int
    type_ok: int
    false_positives: list[str]
    misses: list[str]
    wrong_type: list[str]

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / self.positives if self.positives else 1.0

    @property
    def type_accuracy(self) -> float:
        return self.type_ok / self.tp if self.tp else 1.0

    def row(self) -> dict[str, object]:
        return {
            "split": self.split,
            "utterances": self.n,
            "positives": self.positives,
            "precision": round(self.precision, 3),
            "recall": round(self.recall, 3),
            "type_accuracy": round(self.type_accuracy, 3),
        }


def evaluate(split: str) -> Result:
    extractor = HeuristicExtractor()
    items = [u for s in (SPLITS if split == "all" else (split,)) for u in load(s)]
    res = Result(split, len(items), sum(u.positive for u in items), 0, 0, 0, [], [], [])
    for i, u in enumerate(items):
        found = extractor.extract([Message(f"m{i}", "s", "user", f"User: {u.text}")])
        if found and u.positive:
            res.tp += 1
            if found[0].type == u.label:
                res.type_ok += 1
            else:
                res.wrong_type.append(f"{u.label} -> {found[0].type}: {u.text}")
        elif found:
            res.fp += 1
            res.false_positives.append(f"{u.text}  => {found[0].content}")
        elif u.positive:
            res.misses.append(f"{u.label}: {u.text}")
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--split", default="both", choices=("dev", "held-out", "all", "both"))
    ap.add_argument("--show-misses", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    splits = SPLITS if args.split == "both" else (args.split,)
    results = [evaluate(s) for s in splits]
    if args.json:
        print(json.dumps([r.row() for r in results], indent=2))
        return
    print(f"{'split':<9} {'n':>4} {'pos':>4} {'precision':>9} {'recall':>7} {'type acc':>8}")
    for r in results:
        print(
            f"{r.split:<9} {r.n:>4} {r.positives:>4} {r.precision:>9.3f} {r.recall:>7.3f}"
            f" {r.type_accuracy:>8.3f}"
        )
        if args.show_misses:
            for title, rows in (
                ("false positives", r.false_positives),
                ("missed", r.misses),
                ("wrong type", r.wrong_type),
            ):
                for row in rows:
                    print(f"  [{title}] {row}")


if __name__ == "__main__":
    main()
