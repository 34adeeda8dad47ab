"""ExecuTorch's own LLM runner (the wheel's TextLLMRunner, ``text_llm_runner``) beside ours:
its stats (whole ms), our clock around its executes and the native runner's clock, on the same
program and token counts, from one pytest session (docs/measurements/text-llm-runner.md). (Not
a test: prints the session's table, the tokens and the load average.)

    python evaluations/text_llm_runner.py [--model tiny_llama] [--scheme 8da8w] [--prompt 64]
        [--new 32] [--runs 10] [--rounds 1]

``--model`` is anything ``sme2_generate`` takes (a zoo name, ``executorch:llama?...`` or a
``.pte``: the 0.6B-class program by its path). Each round is one session of two tests, the
native runner then text_llm_runner (a block each, 1 thread, 2 warm-up generations, one traced
generation for the native runner's breakdown); rounds repeat the session.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

TEST = """
import pytest


@pytest.mark.parametrize("runner", ["native", "text_llm_runner"])
def test_runner(sme2_generate, runner):
    gen = sme2_generate({model!r}, scheme={scheme!r}, runner=runner, threads=1)
    print("TOKENS", runner, gen.tokens)
"""
TABLE = "ExecuTorch's own LLM runner (TextLLMRunner), by its stats and by our clock"


def load() -> str:
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())


def session(folder: Path, a) -> list[str]:
    (folder / "test_runner.py").write_text(TEST.format(model=a.model, scheme=a.scheme))
    cmd = [sys.executable, "-m", "pytest", str(folder / "test_runner.py"), "-q", "-s",
           "-p", "no:cacheprovider", f"--rootdir={folder}", f"--runs={a.runs}", "--warmup=2",
           "--sme2-trace-runs=1", "--sme2-loads=1", f"--sme2-prompt-tokens={a.prompt}",
           f"--sme2-new-tokens={a.new}", f"--report-dir={folder / 'report'}"]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=folder)
    lines = done.stdout.splitlines()
    if done.returncode != 0:
        sys.exit("\n".join(lines[-40:]))
    at = lines.index(TABLE)
    return [line for line in lines if line.startswith("TOKENS")] + lines[at:at + 7]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="tiny_llama")
    ap.add_argument("--scheme", default="8da8w")
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--new", type=int, default=32)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=1)
    a = ap.parse_args()
    for k in range(a.rounds):
        with tempfile.TemporaryDirectory() as tmp:
            before = load()
            out = session(Path(tmp), a)
            print(f"round {k + 1}: load {before} at the start, {load()} at the end")
            print("\n".join(out))


if __name__ == "__main__":
    main()
