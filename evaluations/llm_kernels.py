"""Which LLM schemes reach SME2 in which phase, on the emulated Arm64 CPU (QEMU ``-cpu max``),
traced: for each scheme of ``tiny_llama``, a prefill-like and a decode-like execute, on the SME2
side and the SME2-masked side of one native binary (``--runner native,sme2=off``).

    python evaluations/llm_kernels.py OUT_DIR [--schemes fp32,8da4w,8da4w-pc,8da8w]

- prefill: the program the export cache holds (``export_model("tiny_llama", scheme)``:
  dynamic sequence length; exported here by the same recipe unless
  ``OUT_DIR/prefill-SCHEME.pte`` is there) fed ``tokens[1, 127]`` at position 0. Today's
  ``pytest-sme2 run`` feeds a dynamic input at its upper bound (the inputs file must hold
  forward's metadata sizes), so this is a 127-token prefill; the KleidiAI path for any row
  count > 1 is the same. The last position alone goes through the output projection
  (``logits[:, -1]``), so the prefill also runs 1-row kernels.
- decode: the same model and scheme exported with a static ``tokens[1, 1]`` (what
  ``export_llama -kv`` gives without dynamic shapes) at position 64: every matmul has one row.

Every run is ``pytest-sme2 run PTE --device qemu --runner native[,sme2=off] --kernel-trace CSV
--inputs FILE --runs 1 --warmup 0``; the ETDump's XNNPACK operator names (``Fully Connected (NC,
QP8, F32, QC4W)`` is XNNPACK's per-channel-int4 KleidiAI path) are read beside the trace. Writes
``OUT_DIR/table.md`` and ``OUT_DIR/runs.json``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from _common import comma_list

import numpy as np

from pytest_sme2.api import write_tensors

PREFILL_TOKENS, DECODE_POS = 127, 64
SIDES = {"SME2": "native", "masked": "native,sme2=off"}


def program(scheme: str, phase: str, out: Path) -> tuple[Path, float]:
    """tiny_llama in ``scheme`` through the export recipe (:func:`pytest_sme2.programs.recipes.
    export_llm`, verified against eager like every cached export): ``prefill`` the dynamic
    program the cache holds, ``decode`` a static one-token forward. A file already in ``out``
    (``prefill-8da4w.pte``: e.g. copied from the export cache) is used as it is."""
    pte = out / f"{phase}-{scheme}.pte"
    if pte.is_file():
        return pte, 0.0
    from pytest_sme2.programs import recipes as _recipes
    from pytest_sme2.programs.export import accuracy_problem
    from pytest_sme2.programs.llm.llama import LlamaShape, build_llama

    t0 = time.perf_counter()
    definition = build_llama(LlamaShape(prompt_tokens=1 if phase == "decode" else 16))
    if phase == "decode":
        definition.llm.dynamic_shapes = None
    program, info = _recipes.export_llm(definition, scheme, at_stage=lambda s: print(
        f"  {phase}-{scheme}: {s} ({time.perf_counter() - t0:.0f} s)", flush=True))
    problem = accuracy_problem(scheme, info)
    if problem:
        raise SystemExit(f"{phase}-{scheme}: {problem}")
    pte.write_bytes(program.buffer)
    return pte, time.perf_counter() - t0


def kernels(trace: Path) -> list[dict]:
    with open(trace, newline="") as fh:
        return [r for r in csv.DictReader(fh) if r["kind"] == "kleidiai"]


def xnnpack_ops(etdump: Path) -> list[str]:
    from pytest_sme2.api import read_etdump

    frame = read_etdump(etdump)
    names = set()
    for col in ("name", "delegate_debug_id_str"):
        if col in frame:
            names |= {re.sub(r"\s*#\d+$", "", str(n)) for n in frame[col].dropna()}
    return sorted(n for n in names if re.match(r"(Fully Connected|Batch Matrix|Convert)", n))


def run(pte: Path, inputs: Path, runner: str, stem: Path) -> dict:
    cmd = ["pytest-sme2", "run", str(pte), "--device", "qemu", "--runner", runner,
           "--kernel-trace", f"{stem}.csv", "--inputs", str(inputs), "--runs", "1",
           "--warmup", "0", "--etdump", f"{stem}.etdp"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout}{proc.stderr}")
    return {"command": " ".join(cmd), "seconds": round(time.perf_counter() - t0, 1),
            "kernels": kernels(Path(f"{stem}.csv")), "ops": xnnpack_ops(Path(f"{stem}.etdp"))}


def cell(result: dict) -> str:
    ks = result["kernels"]
    mm = [k for k in ks if "matmul" in k["name"]]
    if not mm:
        return "no KleidiAI matmul (XNNPACK's own kernels)"
    return "<br>".join(f"`{k['name'].removeprefix('kai_run_matmul_clamp_')}` ({k['isa_family']})"
                       for k in mm)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--schemes", default="fp32,8da4w,8da4w-pc,8da8w")
    ap.add_argument("--table-only", action="store_true",
                    help="rebuild table.md from the traces already in OUT_DIR")
    args = ap.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.table_only:
        return write_table(out, {scheme: {f"{phase}/{side}": {
            "kernels": kernels(out / f"{scheme}-{phase}-{side}.csv"),
            "ops": xnnpack_ops(out / f"{scheme}-{phase}-{side}.etdp")}
            for phase in ("prefill", "decode") for side in SIDES}
            for scheme in comma_list(args.schemes)})
    rng = np.random.default_rng(0)
    prefill_in, decode_in = out / "prefill127.bin", out / "decode1.bin"
    write_tensors(prefill_in, [rng.integers(0, 512, (1, PREFILL_TOKENS)).astype(np.int64),
                               np.array([0], dtype=np.int64)])
    write_tensors(decode_in, [rng.integers(0, 512, (1, 1)).astype(np.int64),
                              np.array([DECODE_POS], dtype=np.int64)])
    results: dict = {}
    for scheme in comma_list(args.schemes):
        results[scheme] = {}
        for phase, inputs in (("prefill", prefill_in), ("decode", decode_in)):
            pte, seconds = program(scheme, phase, out)
            results[scheme][f"{phase}_pte"] = str(pte)
            results[scheme][f"{phase}_export_seconds"] = round(seconds, 1)
            for side, runner in SIDES.items():
                stem = out / f"{scheme}-{phase}-{side}"
                results[scheme][f"{phase}/{side}"] = r = run(pte, inputs, runner, stem)
                print(f"{scheme} {phase} {side}: {cell(r)} [{r['seconds']} s]", flush=True)
        runs = out / "runs.json"
        known = json.loads(runs.read_text()) if runs.is_file() else {}
        runs.write_text(json.dumps({**known, **results}, indent=1) + "\n")
    write_table(out, results)


def write_table(out: Path, results: dict) -> None:
    lines = ["| scheme | phase | SME2 side (`-cpu max`) | masked side (`sme2=off`) | "
             "XNNPACK GEMM operators (SME2 side / masked) |", "|---|---|---|---|---|"]
    for scheme, r in results.items():
        for phase in ("prefill", "decode"):
            on, off = r[f"{phase}/SME2"], r[f"{phase}/masked"]
            ops = "; ".join(o for o in on["ops"] if not o.startswith("Convert")) or "-"
            ops_off = "; ".join(o for o in off["ops"] if not o.startswith("Convert")) or "-"
            lines.append(f"| {scheme} | {phase} | {cell(on)} | {cell(off)} | {ops} / "
                         f"{ops_off} |")
    (out / "table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.exit(main())
