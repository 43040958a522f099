"""One text toolkit (issue 19 §3): ``text/lines.py`` (one line, cut) and ``text/words.py``
(the words of a query and of the texts it is matched against).

Before, four functions were called ``one_line`` (extraction's summary, the adapters, the
MCP server, the CLI's memory row), each cutting differently, and a query and the passages
shown for it were split into words by two different patterns.
"""

from __future__ import annotations

import ast
from pathlib import Path

from llmem_hooks.text.lines import cap, clip, clip_at_word, flatten, pieces
from llmem_hooks.text.words import identifier_parts, words

ROOT = Path(__file__).resolve().parents[2]


def test_flatten_puts_any_whitespace_on_one_line() -> None:
    assert flatten("  a\n\tb \r\n c  ") == "a b c"


def test_clip_cuts_at_exactly_the_limit_with_its_mark() -> None:
    assert clip("short  text", 20) == "short text"
    assert clip("abcdefghij klmnop", 10) == "abcdefg..."
    assert clip("abcdefghij klmnop", 10, "…") == "abcdefghi…"
    assert clip("abcdefgh  ijkl", 10, "…") == "abcdefgh…"  # no space before the mark
    assert len(clip("x" * 500, 200)) == 200


def test_clip_at_word_cuts_between_words_and_drops_dangling_punctuation() -> None:
    assert clip_at_word("the deploy runs on fridays", 17) == "the deploy..."
    assert clip_at_word("alpha, beta gamma", 14) == "alpha..."
    assert clip_at_word("supercalifragilistic", 10, "…") == "supercali…"
    assert clip_at_word("fits", 4) == "fits"


def test_cap_keeps_the_lines() -> None:
    assert cap("line one\nline two", 50) == "line one\nline two"
    assert cap("line one\nline two", 10) == "line one…"
    assert cap("abcdefghijkl", 8, "...") == "abcde..."


def test_pieces_cut_a_long_line_between_words() -> None:
    text = " ".join(f"word{i}" for i in range(200))
    cut = list(pieces(text, 100))
    assert all(len(p) <= 100 for p in cut) and " ".join(cut) == text
    assert list(pieces("short", 100)) == ["short"] and list(pieces("", 10)) == []
    assert list(pieces("x" * 25, 10)) == ["x" * 10, "x" * 10, "x" * 5]  # one long word
    assert list(pieces("abc", 0)) == ["a", "b", "c"]  # never stuck
    # linear: a 10 MB line is one pass, and a reader that stops early reads no further
    huge = pieces("word " * 2_000_000, 300)
    assert [len(next(huge)) <= 300 for _ in range(3)] == [True] * 3


def test_no_function_is_called_one_line_any_more() -> None:
    found = []
    for base in (ROOT / "llmem_hooks", ROOT / "adapters"):
        for path in base.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.FunctionDef) and node.name.strip("_") == "one_line":
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []


def test_words_keep_paths_versions_and_handles_whole() -> None:
    """The one splitter: a query's words (text.query) and a passage's (search.passages)."""
    assert words("Use C++ and foo:bar, v1.2.3 at @team/x.") == [
        "use",
        "c++",
        "and",
        "foo:bar",
        "v1.2.3",
        "at",
        "team/x",
    ]


def test_identifier_parts_are_the_words_inside_camel_case() -> None:
    text = "Set MaxConcurrentReconciles, then HTTPServer and getUserById; iOS, v1alpha1, snake_case"
    assert identifier_parts(text) == "max concurrent reconciles http server get user by id"
    assert identifier_parts("plain words, kebab-case and snake_case only") == ""
    assert identifier_parts("useState useEffect") == "use state effect"  # each word once
    huge = " ".join(f"Name{i}Part{i}Thing" for i in range(5000))  # bounded, not quadratic
    assert 300 < len(identifier_parts(huge)) <= 400


def test_identifier_parts_stays_linear_on_adversarial_text() -> None:
    """A run of capitals between a lower-case letter and an underscore made a pattern with
    nested repetition backtrack exponentially (24 capitals: 1 s; 60: years). It runs over
    every exchange the sidecar stores, in a process of its own here so a regression fails
    instead of hanging the suite."""
    import subprocess
    import sys

    code = (
        "from llmem_hooks.text.words import identifier_parts as p\n"
        "for s in ('a' + 'A' * 60 + '_', 'aB' * 50_000, 'A' * 100_000 + 'b',\n"
        "          'a1' * 50_000 + 'Z'):\n"
        "    p(s)\n"
        "print(p('a' + 'A' * 60 + '_'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=20)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""  # one hump-less word: "a" is dropped, the capitals one part
