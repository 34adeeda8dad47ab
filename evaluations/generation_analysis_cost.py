"""What does the generation analysis cost per ETDump event, against today's analysis of the same
file? (Not a unit test: prints figures.)

    python evaluations/generation_analysis_cost.py [--pte M.pte] [--prompt 16]
        [--new 99] [--generations 10] [--warmup 1] [--repeat 7]

Our native runner (host) makes one generation ETDump of the tiny 8da4w Llama (ExecuTorch's
export_llama .pte, cached: tests/llm_export.py): ``--generations`` generations of 1 prefill +
``--new`` decode executes (default 10 x 100 = 1,000 executes). Then, on that one file, the
fastest of ``--repeat`` calls of:

* ``read_etdump`` (shared by both);
* today's analysis: ``analyze`` (every execute a run, the warm-up generations' executes
  dropped);
* the generation analysis: ``analyze_generation`` (phases, per-phase stats and categories,
  TTFT);

the two analyses interleaved call by call on the same frame, and each one's microseconds per
event, alone and with the read (events = rows of the frame read_etdump gives).
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path

from _common import generation_parser, tiny_llama_pte



def _best(fn, repeat: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3, out


def main() -> None:
    a = generation_parser(16, 99, 1, generations=10, repeat=7).parse_args()

    from pytest_sme2.api import (analyze_generation, parse_summary, analyze, read_etdump,
                                 Generation, RunRequest, native_runner)

    pte = tiny_llama_pte(a.pte)
    with tempfile.TemporaryDirectory() as tmp:
        req = RunRequest(pte, Path(tmp) / "g.etdump", runs=a.generations - a.warmup,
                         warmup=a.warmup, generation=Generation(a.prompt, a.new))
        done = subprocess.run(native_runner().command(req), capture_output=True, text=True,
                              check=True)
        summary = parse_summary(done.stdout).generation
        assert summary is not None
        events = read_etdump(req.etdump)
        n_events = len(events)
        executes = summary.generations * summary.executes_per_generation
        warm_executes = summary.warmup * summary.executes_per_generation
        print(f"ETDump: {req.etdump.stat().st_size / 1e6:.2f} MB, {executes} executes "
              f"({summary.generations} generations x {summary.executes_per_generation}), "
              f"{n_events} events")
        read_ms, _ = _best(lambda: read_etdump(req.etdump), a.repeat)
        # The two analyses of the one frame, interleaved call by call (this VM drifts).
        today, gen, result = [], [], None
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            analyze(events, warmup=warm_executes)
            t1 = time.perf_counter()
            result = analyze_generation(events, summary)
            t2 = time.perf_counter()
            today.append((t1 - t0) * 1e3)
            gen.append((t2 - t1) * 1e3)
        today_ms, gen_ms = min(today), min(gen)

        def line(label: str, ms: float) -> str:
            return (f"{label:<34} {ms:8.1f} ms  {1e3 * ms / n_events:6.2f} us/event;  with "
                    f"read_etdump {read_ms + ms:8.1f} ms  "
                    f"{1e3 * (read_ms + ms) / n_events:6.2f} us/event")

        print(f"read_etdump alone:                 {read_ms:8.1f} ms  "
              f"{1e3 * read_ms / n_events:6.2f} us/event")
        print(line("today's analysis (analyze):", today_ms))
        print(line("generation (analyze_generation):", gen_ms))
        print(f"generation / today: {gen_ms / today_ms:.2f} (analysis alone), "
              f"{(read_ms + gen_ms) / (read_ms + today_ms):.2f} (with the read)")
        print(f"result: prefill {result.prefill.tokens_per_s:.0f} tok/s, decode "
              f"{result.decode.tokens_per_s:.0f} tok/s, TTFT {result.ttft_ms:.3f} ms")


if __name__ == "__main__":
    main()
