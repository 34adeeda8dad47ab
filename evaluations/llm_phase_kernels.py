"""Which kernels each LLM phase ran, proven on the emulated SME2 CPU (QEMU user mode, -cpu max):
the native runner, cross-built for aarch64, runs the phase-only evidence processes of a
generation (``RunRequest.phase_only``: P prompt tokens and no decode step; one-token executes
only), each under QEMU's translated-code trace, with SME2 as the CPU reports it and with
SME/SME2 masked off (same binary). QEMU logs each translated block once per process, so only a
process that runs one phase can tell that phase's kernels.

    python evaluations/llm_phase_kernels.py [PTE ...]    (default: the tiny 8da4w Llama)

Prints, per .pte, side and phase: the KleidiAI/XNNPACK micro-kernels executed (blocks; ISA) and
the streaming-SME blocks, then the generated tokens of both sides (equal = same outputs).
Needs ``pytest-sme2 setup qemu``. Emulated times say nothing about speed.
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import replace
from pathlib import Path


from _common import tiny_llama_pte

from pytest_sme2.api import (analyze_generation_file, KernelSources, read_kernel_trace_csv,
                             parse_summary, QemuDevice, Generation, RunRequest, masked_pair)


DEFAULT_GENERATION = Generation(32, 8)


def phase_kernels(pte: Path, generation: Generation = DEFAULT_GENERATION) -> dict:
    device = QemuDevice("qemu")
    specs = {s.name: s for s in masked_pair() if s.name in ("sme2_on", "sme2_off")}
    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for side, spec in specs.items():
            runner = spec.make(target=device.target)
            for phase in ("prefill", "decode"):
                base = RunRequest(pte, Path(tmp) / f"{side}-{phase}.etdump", threads=1,
                                  generation=generation, timeout_s=1200)
                req = base.phase_only(phase)
                outcome = device.run(runner, req)
                trace = read_kernel_trace_csv(outcome.kernel_trace)
                summary = parse_summary(outcome.stdout).generation
                # The phase's verdict as the analysis gives it: this process's ETDump (its
                # packed operators) with its own trace as that phase's evidence.
                sources = KernelSources(device_sme2=side == "sme2_on")
                phases = {"prefill": sources, "decode": sources,
                          phase: replace(sources, trace=outcome.kernel_trace)}
                result = analyze_generation_file(req.etdump, outcome.stdout, **phases)
                evidence = result.phase(phase).kernel_evidence
                out[(side, phase)] = {
                    "generation": req.generation,
                    "sme2": evidence.sme2 if evidence else None,
                    "reason": evidence.reason if evidence else "",
                    "kernels": [(k.name, k.isa_family, k.blocks) for k in trace.executed
                                if k.kind == "kleidiai" or "gemm" in k.name or "igemm" in k.name],
                    "streaming_blocks": trace.streaming_blocks,
                    "tokens": list(summary.tokens) if summary else None,
                }
    return out


def main(argv: list[str]) -> int:
    ptes = [Path(a) for a in argv] or [tiny_llama_pte(None)]
    for pte in ptes:
        print(f"== {pte}")
        result = phase_kernels(pte)
        for (side, phase), r in result.items():
            g = r["generation"]
            print(f"-- {side} {phase} (generate {g.arg}): {r['streaming_blocks']} streaming-SME "
                  f"blocks; SME2 {r['sme2']}: {r['reason']}")
            for name, isa, blocks in r["kernels"]:
                print(f"   {name}  [{isa}]  {blocks} blocks")
        for phase in ("prefill", "decode"):
            on, off = result[("sme2_on", phase)]["tokens"], result[("sme2_off", phase)]["tokens"]
            print(f"tokens {phase}: sme2_on {on} sme2_off {off} -> "
                  f"{'equal' if on == off else 'DIFFER'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
