"""`llmem-hooks doctor`: which extractor runs and why, for Ollama up, down, without the
model, behind a refused remote URL, disabled and over budget; exit codes; no credentials
in the output."""

from __future__ import annotations

import copy
import json
import socket
from pathlib import Path
from typing import Any

import pytest

from llmem_hooks import MemoryStore
from llmem_hooks.agents.doctor import Check, _vector_checks, diagnose, exit_code, render
from llmem_hooks.cli import main
from llmem_hooks.config import DEFAULT_CONFIG, Config
from llmem_hooks.model.budget import BudgetLimits, ModelBudget


def config(url: str, **ollama: Any) -> dict[str, Any]:
    cfg = copy.deepcopy(DEFAULT_CONFIG)
    cfg["ollama"].update({"base_url": url, **ollama})
    return cfg


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


def write_config(home: Path, url: str, extra: str = "") -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(f"ollama:\n  base_url: {url}\n{extra}")


def test_ollama_up_with_the_model(fake_ollama: tuple[Any, str], store: MemoryStore) -> None:
    _, url = fake_ollama
    checks = by_name(diagnose(config(url), store))
    assert checks["base_url"].ok and "on this machine" in checks["base_url"].detail
    assert checks["ollama"].ok and "0.0.0-fake" in checks["ollama"].detail
    assert checks["model"].ok and "llama3.2" in checks["model"].detail
    assert checks["budget"].ok and "0 of 500000 tokens" in checks["budget"].detail
    assert checks["extractor"].detail == f"ollama (llama3.2 at {url}) + heuristics"
    assert exit_code(list(checks.values())) == 0


def test_ollama_down_is_a_valid_setup(store: MemoryStore) -> None:
    url = closed_port_url()
    checks = diagnose(config(url), store)
    named = by_name(checks)
    assert named["ollama"].status == "warn" and "cannot connect" in named["ollama"].detail
    assert "model" not in named
    assert named["extractor"].detail == f"heuristic: Ollama does not answer at {url}"
    assert exit_code(checks) == 0


def test_model_missing(fake_ollama: tuple[Any, str], store: MemoryStore) -> None:
    _, url = fake_ollama
    named = by_name(diagnose(config(url, model="qwen3:8b"), store))
    assert named["model"].status == "warn"
    assert "ollama pull qwen3:8b" in named["model"].detail
    assert named["extractor"].detail == "heuristic: model qwen3:8b is not installed"


def test_remote_url_is_refused_and_is_a_config_error(store: MemoryStore) -> None:
    checks = diagnose(config("http://203.0.113.7:11434"), store)
    named = by_name(checks)
    assert named["base_url"].status == "error" and "allow_remote" in named["base_url"].detail
    assert "ollama" not in named  # never contacted
    assert named["extractor"].detail.startswith("heuristic: ollama.base_url")
    assert exit_code(checks) == 2


def test_disabled_and_over_budget(fake_ollama: tuple[Any, str], store: MemoryStore) -> None:
    _, url = fake_ollama
    named = by_name(diagnose(config(url, enabled=False), store))
    assert named["ollama"].status == "skip"
    assert named["extractor"].detail == "heuristic: ollama.enabled is false"
    cfg = config(url)
    cfg["budget"]["day_tokens"] = 1000
    ModelBudget(store, BudgetLimits(day_tokens=1000)).record(
        "opencode:s", prompt_tokens=1000, output_tokens=0, seconds=1
    )
    named = by_name(diagnose(cfg, store))
    assert named["budget"].status == "warn"
    assert named["extractor"].detail.startswith("heuristic: today's model budget is spent")


def test_vector_checks_hook_is_called(store: MemoryStore) -> None:
    cfg = {**DEFAULT_CONFIG, "ollama": {**DEFAULT_CONFIG["ollama"], "enabled": False}}
    embedder, check = _vector_checks(
        Config.from_mapping(cfg), store
    )  # details: tests/store/test_vectors.py
    assert (check.name, check.status) == ("vectors", "ok") and "sqlite-vec" in check.detail
    assert embedder.name == "embedder" and "keyword-only" in embedder.detail
    assert [c.status for c in _vector_checks(Config.from_mapping(cfg), None)] == ["ok", "skip"]


def test_embedder_check_up_down_and_wrong_size(
    fake_ollama: tuple[Any, str], store: MemoryStore
) -> None:
    _, url = fake_ollama
    up = {**DEFAULT_CONFIG, "ollama": {**DEFAULT_CONFIG["ollama"], "base_url": url}}
    embedder = _vector_checks(Config.from_mapping(up), store)[0]
    assert embedder.status == "ok" and "768-dimensional" in embedder.detail
    small = {**up, "memory": {**DEFAULT_CONFIG["memory"], "vec_dimensions": 384}}
    embedder = _vector_checks(Config.from_mapping(small), store)[0]
    assert embedder.status == "warn" and "memory.vec_dimensions is 384" in embedder.detail
    down = {**up, "ollama": {**up["ollama"], "base_url": closed_port_url()}}
    embedder = _vector_checks(Config.from_mapping(down), store)[0]
    assert embedder.status == "warn" and "keyword-only" in embedder.detail


def test_cli_doctor_up_json(
    fake_ollama: tuple[Any, str], llmem_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, url = fake_ollama
    write_config(llmem_home, url)
    assert main(["doctor", "--json"]) == 0
    checks = json.loads(capsys.readouterr().out)["checks"]
    assert [c["name"] for c in checks][:2] == ["config", "base_url"]
    extractor = next(c for c in checks if c["name"] == "extractor")
    assert extractor["ok"] and extractor["detail"].startswith("ollama (llama3.2")


def test_cli_doctor_down_plain(llmem_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_config(llmem_home, closed_port_url())
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "warn  ollama" in out and "heuristic: Ollama does not answer" in out
    assert main(["doctor", "--markdown"]) == 0
    assert "- **extractor**: warn — heuristic:" in capsys.readouterr().out


def test_cli_doctor_remote_refused_exits_2(
    llmem_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(llmem_home, "http://203.0.113.7:11434")
    assert main(["doctor"]) == 2
    assert "error base_url" in capsys.readouterr().out


def test_cli_doctor_bad_config_exits_2(
    llmem_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(llmem_home, "http://localhost:11434", "budget:\n  day_tokens: lots\n")
    assert main(["doctor"]) == 2
    assert "budget.day_tokens" in capsys.readouterr().err


def test_credentials_are_never_printed(
    fake_ollama: tuple[Any, str], llmem_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, url = fake_ollama
    for target in (url, closed_port_url(), "http://203.0.113.7:11434"):
        write_config(llmem_home, target.replace("http://", "http://admin:pa55w0rd@"))
        for args in (["doctor"], ["doctor", "--json"]):
            main(args)
            out, err = capsys.readouterr()
            assert "pa55w0rd" not in out + err and "admin" not in out + err


def test_render_aligns_names() -> None:
    text = render([Check("a", "ok", "x"), Check("longer", "warn", "y")])
    assert text == "ok    a       x\nwarn  longer  y\n"
