"""Results documents for the history's tests: the recorded QEMU session, re-timed per commit
(a step or a drift on one model, the others unchanged), with identities."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path

SOURCE = Path(__file__).with_name("results_qemu_session.json")


def session_doc(i: int, factor_of=lambda model, i: 1.0, noise: float = 0.02, seed: int = 0,
                commit: str | None = "auto") -> dict:
    doc = copy.deepcopy(json.loads(SOURCE.read_text()))
    rng = random.Random(seed * 1000 + i)
    doc["session"]["identity"] = {
        "commit": f"{i:040x}" if commit == "auto" else commit, "branch": "main",
        "time": f"2026-11-{1 + i // 24:02d}T{i % 24:02d}:00:00+00:00"}
    for b in doc["benchmarks"]:
        f = factor_of(b["model"], i) * rng.gauss(1.0, noise)
        b["e2e_ms"] = [x * f for x in b["e2e_ms"]]
        b["e2e"]["median_ms"] *= f
        b["median_ms"] *= f
    return doc


def write_series(folder: Path, n: int, factor_of, seed: int = 0,
                 noise: float = 0.02) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        path = folder / f"results-{i:03d}.json"
        path.write_text(json.dumps(session_doc(i, factor_of, noise=noise, seed=seed)))
        paths.append(path)
    return paths


def llm_session_doc(i: int, prefill_factor: float = 1.0, seed: int = 0) -> dict:
    """A session of one LLM generation (tiny_llama 8da4w) and one forward pass, re-timed per
    commit: ``prefill_factor`` scales the prefill only (its time and TTFT), decode is
    unchanged, all with 2% noise."""
    from tests.fakes.results_docs import generation_block, single_doc

    rng = random.Random(seed * 1000 + i)
    doc = single_doc()
    doc["session"]["identity"] = {"commit": f"{i:040x}", "branch": "main",
                                  "time": f"2026-11-{1 + i // 24:02d}T{i % 24:02d}:00:00+00:00"}
    doc["benchmarks"].append(generation_block(
        "8da4w", prefill_ms=16.0 * prefill_factor * rng.gauss(1.0, 0.02),
        token_ms=rng.gauss(1.0, 0.02)))
    return doc
