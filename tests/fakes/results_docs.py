"""Crafted results documents (schema ``pytest-sme2/results/1``) for report and recommendation
tests: small, with round numbers, so expected figures can be written down by hand. Each has
every key a session writes, in the order it writes them, so it loads and writes back byte for
byte (``pytest_sme2.results.load_results``).

``sme2_doc()`` is the story the report exists to tell: SME2 off vs on on an SME2 phone,
Convolution and GEMM 4x faster, everything else unchanged, so Data Movement's share grows from
10% to 25%; a portable ``_to_dim_order_copy`` (Hardsigmoid casts) crosses 5% of E2E on the fast
side; the on side's kernel evidence is only 'indicated'.
"""

from __future__ import annotations

import copy
import statistics
from typing import Any

from pytest_sme2.analysis.latency import latency_stats

ANDROID = {"kind": "android", "serial": "R5CX1234", "model": "SM-S938B",
           "cpu": "Test SoC (Cortex-X925)", "abi": "arm64-v8a", "os": "Android 15",
           "kernel": "6.6.30-android15", "cores": 8, "sme": True, "sme2": True,
           "executorch": "1.5.1", "extra": {"cpu_max_khz": {"7": 3900000}}}
HOST_NO_SME2 = {"kind": "host", "serial": "vm", "model": "x86_64", "cpu": "AMD EPYC",
                "abi": "x86_64", "os": "Linux", "kernel": "6.1", "cores": 2, "sme": False,
                "sme2": False, "executorch": "1.5.1", "extra": {}}
SCALE_ACT = [f"features.{i}.block.{j}.scale_activation" for i, j in
             ((1, 1), (4, 2), (5, 2), (6, 2), (7, 2), (8, 2), (9, 2), (10, 2), (11, 2))]


def op(name: str, ms: float, e2e_ms: float, category: str, *, delegated: bool = True,
       calls: float = 1.0, instr: int = 0, op_types=(), module_paths=()) -> dict[str, Any]:
    pct = 100 * ms / e2e_ms
    return {"name": name, "instruction_id": instr, "category": category, "delegated": delegated,
            "backend": "XnnpackBackend" if delegated else "portable", "calls_per_run": calls,
            "mean_ms_per_run": ms, "pct_e2e": pct, "bottleneck": pct > 5,
            "should_delegate": pct > 5 and not delegated, "op_types": list(op_types),
            "module_paths": list(module_paths), "kernel_hint": ""}


def evidence(verdict: str, reason: str = "", packed=(), kernels=(), executed=None,
             streaming_blocks: int | None = None) -> dict[str, Any]:
    """Kernel evidence; ``executed`` (kernels a trace shows ran) makes it a traced run's."""
    traced = executed is not None
    return {"sme2": verdict, "reason": reason or f"test reason for {verdict}",
            "kleidiai_ops": list(packed), "kernels": list(kernels),
            "executed_kernels": list(executed or []),
            "streaming_sme_blocks": (streaming_blocks or 0) if traced else None,
            "kernel_trace_source": "/tmp/kernels.csv" if traced else ""}


def benchmark(nodeid: str, runner: str, samples: list[float], categories: dict[str, float],
              operators: list[dict], *, model: str = "mobilenet_v3_small", dtype: str = "fp16",
              threads: int = 1, labels: dict | None = None, device: dict | None = None,
              ev: dict | None = None, block: int | None = None, overheads: dict | None = None,
              thermal: tuple[float, float] | None = None, runs: int | None = None,
              warmup: int = 3) -> dict[str, Any]:
    """One benchmark as ``BlockResult.to_json()`` writes it. ``categories`` are given
    without Other: Other is the rest of the samples' mean, as the analysis computes it."""
    stats = latency_stats(samples)
    cats = dict(categories)
    cats["Other"] = stats.mean_ms - sum(cats.values())
    return {
        "nodeid": nodeid, "model": model, "dtype": dtype, "threads": threads, "runner": runner,
        "runner_info": {"name": runner, "kind": "binary", "labels": labels or {}},
        "device": copy.deepcopy(device or ANDROID), "runs": runs or len(samples),
        "warmup": warmup, "e2e_ms": list(samples), "median_ms": stats.median_ms,
        "p90_ms": stats.p90_ms, "cv_pct": stats.cv_pct, "e2e": stats.to_dict(),
        "etdump": f"/tmp/{nodeid}.etdump", "pte": "/tmp/model.pte", "export_key": "k",
        "categories_ms": cats,
        "overheads_ms": overheads or {"delegate_ms": 0.05, "operator_call_ms": 0.02,
                                      "runtime_ms": 0.03},
        "operators": operators, "kernel_evidence": ev or evidence("unknown"),
        "thermal_before": {"cpu": thermal[0]} if thermal else None,
        "thermal_after": {"cpu": thermal[1]} if thermal else None,
        "block": block, "outputs": None, "kernel_trace": None,
    }


def steady(mean: float, n: int = 20, jitter: float = 0.002) -> list[float]:
    """``n`` samples with exactly ``mean`` as their mean and a CV well under 1%."""
    half = [mean * (1 + jitter * ((i % 5) - 2) / 2) for i in range(n // 2)]
    return half + [2 * mean - x for x in half]


def noisy(mean: float, n: int = 20) -> list[float]:
    """Samples with mean ``mean`` and a CV around 20%."""
    half = [mean * (1 + 0.2 * (1 if i % 2 else -1)) for i in range(n // 2)]
    return half + [2 * mean - x for x in half]


def interval(point: float, low: float, high: float) -> dict[str, float]:
    return {"point": point, "low": low, "high": high, "confidence": 0.95}


def comparison(base: list[dict], cand: list[dict], speedup: dict, verdict: str,
               category_speedups: dict, outputs: dict | None = None,
               nodeid: str = "bench.py::test_sme2") -> dict[str, Any]:
    b0 = base[0]
    return {"nodeid": nodeid, "model": b0["model"], "dtype": b0["dtype"],
            "threads": b0["threads"], "base": b0["runner"], "candidate": cand[0]["runner"],
            "base_median_ms": statistics.median(b["median_ms"] for b in base),
            "candidate_median_ms": statistics.median(b["median_ms"] for b in cand),
            "speedup": speedup, "category_speedups": category_speedups,
            "outputs": outputs if outputs is not None else
            {"max_abs_diff": 0.001, "max_rel_diff": 0.0005, "tolerance": 0.01, "equal": True},
            "verdict": verdict, "margin": 0.02, "emulated": False,
            "base_block_medians_ms": [b["median_ms"] for b in base],
            "candidate_block_medians_ms": [b["median_ms"] for b in cand],
            "base_blocks": [b["nodeid"] for b in base],
            "candidate_blocks": [b["nodeid"] for b in cand]}


def _sme2_side(runner: str, conv: float, gemm: float, blocks: int, *, packed: bool,
               ev: dict, device: dict, labels: dict, samples=steady,
               thermal=None) -> list[dict]:
    e2e = conv + gemm + 2.0          # + Data Movement 1.0, Elementwise 0.5, Pooling 0.2, 0.3
    fc = "Fully Connected (NC, PF16) #1" if packed else "Fully Connected (NC, F16) #1"
    ops = [op("Convolution (NHWC, F16) IGEMM #1", conv, e2e, "Convolution"),
           op(fc, gemm, e2e, "GEMM"),
           op("Transpose (ND, X16) #1", 0.6, e2e, "Data Movement"),
           op("native_call__to_dim_order_copy.out", 0.3, e2e, "Data Movement", delegated=False,
              calls=18, instr=7, op_types=["aten._to_copy.default"], module_paths=SCALE_ACT),
           op("Convert (NC, F32, F16) #1", 0.1, e2e, "Data Movement"),
           op("HardSwish (NC) #1", 0.5, e2e, "Elementwise"),
           op("Mean (ND) #1", 0.2, e2e, "Pooling")]
    cats = {"Convolution": conv, "GEMM": gemm, "Data Movement": 1.0, "Elementwise": 0.5,
            "Pooling": 0.2, "Normalization": 0.0}
    return [benchmark(f"bench.py::test_sme2[{runner}#{i}]", runner, samples(e2e), cats,
                      copy.deepcopy(ops), labels=labels, device=device, ev=ev, block=i,
                      thermal=thermal)
            for i in range(blocks)]


def sme2_doc(*, verdict: str = "faster", speedup: dict | None = None, device: dict = ANDROID,
             on_evidence: dict | None = None, conv_speedup: dict | None = None,
             outputs: dict | None = None, blocks: int = 5, on_samples=steady,
             on_conv: float = 1.5, thermal=None) -> dict[str, Any]:
    """SME2 off (base, 10 ms) vs on (candidate, 4 ms) on an SME2 Android phone."""
    off = _sme2_side("sme2_off", 6.0, 2.0, blocks, packed=False,
                     ev=evidence("unknown", "no KleidiAI packed operators in the ETDump operator "
                                 "names and no kernel trace; device hwcaps report SME2"),
                     device=device, labels={"sme2": "off", "build_type": "Release"})
    on = _sme2_side("sme2_on", on_conv, 0.5, blocks, packed=True,
                    ev=on_evidence or evidence(
                        "indicated", "1 KleidiAI packed operator ran (Fully Connected (NC, PF16))"
                        " on a device reporting SME2; no kernel trace to prove SME2 "
                        "micro-kernels", packed=["Fully Connected (NC, PF16)"]),
                    device=device, labels={"sme2": "on", "build_type": "Release"},
                    samples=on_samples, thermal=thermal)
    one = interval(1.0, 0.98, 1.02)
    cats = {"Convolution": conv_speedup or interval(4.0, 3.9, 4.1),
            "GEMM": interval(4.0, 3.8, 4.2), "Data Movement": one, "Elementwise": one,
            "Pooling": one, "Normalization": None, "Other": one}
    cmp = comparison(off, on, speedup or interval(2.5, 2.45, 2.55), verdict, cats, outputs)
    return {"schema": "pytest-sme2/results/1",
            "session": {"config": {"device": "android", "runs": 20, "warmup": 3, "blocks": blocks},
                        "runners": {"sme2_off": {"kind": "binary", "labels": {"sme2": "off"},
                                                 "path": "/opt/runners/sme2_off"},
                                    "sme2_on": {"kind": "binary", "labels": {"sme2": "on"},
                                                "path": "/opt/runners/sme2_on"}},
                        "versions": {"executorch": "1.5.1", "torch": "2.13.0"}},
            "benchmarks": off + on, "comparisons": [cmp]}


def single_doc(*, samples=None, operators=None, categories=None, device=HOST_NO_SME2,
               ev=None, runner: str = "python", overheads=None) -> dict[str, Any]:
    """One plain benchmark (no comparison) of a 2 ms model on a host without SME2."""
    e2e = 2.0
    ops = operators if operators is not None else [
        op("Convolution (NHWC, F32) IGEMM #1", 1.6, e2e, "Convolution"),
        op("Transpose (ND, X32) #1", 0.1, e2e, "Data Movement"),
        op("Add (ND) #1", 0.1, e2e, "Elementwise")]
    cats = categories or {"Convolution": 1.6, "GEMM": 0.0, "Data Movement": 0.1,
                          "Elementwise": 0.1, "Pooling": 0.0, "Normalization": 0.0}
    b = benchmark("bench.py::test_latency[toy_cnn-fp32-t1]", runner, samples or steady(e2e),
                  cats, ops, model="toy_cnn", dtype="fp32", device=device,
                  ev=ev or evidence("absent", "device hwcaps report no SME2"),
                  overheads=overheads, labels={"runtime": "executorch.pybindings"})
    return {"schema": "pytest-sme2/results/1", "session": {}, "benchmarks": [b],
            "comparisons": []}


MATRIX_MODELS = ("toy_cnn", "mobilenet_v3_small", "vit_tiny")
MATRIX_DTYPES = ("fp32", "fp16", "int8")


def matrix_doc(*, models=MATRIX_MODELS, dtypes=MATRIX_DTYPES, threads=(1, 2),
               blocks: int = 3) -> dict[str, Any]:
    """A default-size session on an SME2 phone: every model x dtype x threads measured by the
    ``native`` runner (test_latency), and SME2 off vs on at one thread (test_sme2). Latency
    grows with the model's and dtype's index, so every case has its own figures."""
    benches, comparisons = [], []
    one = interval(1.0, 0.98, 1.02)
    for mi, model in enumerate(models):
        for di, dtype in enumerate(dtypes):
            for t in threads:
                e2e = (1.0 + mi) * (1.0 + 0.5 * di) / t
                cats = {"Convolution": 0.5 * e2e, "GEMM": 0.3 * e2e, "Data Movement": 0.1 * e2e}
                ops = [op(f"Convolution (NHWC) #{mi}{di}", 0.5 * e2e, e2e, "Convolution"),
                       op("Fully Connected (NC) #1", 0.3 * e2e, e2e, "GEMM")]
                benches.append(benchmark(f"test_latency.py::test_latency[{model}-{dtype}-t{t}]",
                                         "native", steady(e2e), cats, ops, model=model,
                                         dtype=dtype, threads=t))
            sides = {}
            for runner, conv in (("sme2_off", 0.6), ("sme2_on", 0.15)):
                e2e = (1.0 + mi) * (conv + 0.4)
                cats = {"Convolution": (1.0 + mi) * conv, "GEMM": (1.0 + mi) * 0.2,
                        "Data Movement": (1.0 + mi) * 0.1}
                ops = [op("Convolution (NHWC) #1", cats["Convolution"], e2e, "Convolution")]
                sides[runner] = [benchmark(
                    f"test_sme2.py::test_sme2_speedup[{model}-{dtype}-t1][{runner}#{i}]", runner,
                    steady(e2e), cats, copy.deepcopy(ops), model=model, dtype=dtype, threads=1,
                    block=i, labels={"sme2": runner.removeprefix("sme2_")},
                    ev=evidence("indicated" if runner == "sme2_on" else "unknown"))
                    for i in range(blocks)]
                benches += sides[runner]
            comparisons.append(comparison(
                sides["sme2_off"], sides["sme2_on"], interval(1.8, 1.7, 1.9), "faster",
                {"Convolution": interval(4.0, 3.9, 4.1), "GEMM": one, "Data Movement": one,
                 "Other": one}, nodeid=f"test_sme2.py::test_sme2_speedup[{model}-{dtype}-t1]"))
    return {"schema": "pytest-sme2/results/1",
            "session": {"config": {"device": "android", "runs": 20, "warmup": 3,
                                   "blocks": blocks}},
            "benchmarks": benches, "comparisons": comparisons}


def mixed_doc() -> dict[str, Any]:
    """:func:`sme2_doc` on the phone, plus what makes grouping hard: on a host, a benchmark with
    two confirmation blocks (recorded before it, as a session records them) and a regression
    verdict, and another test at the same point and runner; the same test and point on the
    phone (1 ms); a confirmation block of the comparison's candidate that the comparison does
    not name; verdicts on both sides of the comparison."""
    d = sme2_doc()
    cats = {"Convolution": 1.6, "GEMM": 0.0, "Data Movement": 0.1}
    ops = [op("Convolution (NHWC, F32) IGEMM #1", 1.6, 2.0, "Convolution")]
    node = "bench.py::test_latency[toy_cnn-fp32-t1]"

    def toy(nodeid, ms, device, block=None):
        return benchmark(nodeid, "python", steady(ms), cats, copy.deepcopy(ops), model="toy_cnn",
                         dtype="fp32", device=device, block=block)

    confirming = [toy(node, 2.1, HOST_NO_SME2, 1), toy(node, 2.2, HOST_NO_SME2, 2)]
    first = toy(node, 2.0, HOST_NO_SME2)
    first["baseline"] = {"status": "regression", "reason": "slower",
                         "ratio": interval(1.2, 1.1, 1.3)}
    on0 = next(b for b in d["benchmarks"] if b["runner"] == "sme2_on")
    side_confirming = {**copy.deepcopy(on0), "nodeid": "bench.py::test_sme2[sme2_on#5]",
                       "block": 5}
    d["comparisons"][0]["baselines"] = {
        "sme2_off": {"status": "ok", "reason": "same", "ratio": interval(1.0, 0.99, 1.01)},
        "sme2_on": {"status": "not_compared", "reason": "another device", "foreign": True}}
    d["benchmarks"] = [*confirming, first, *d["benchmarks"], side_confirming,
                       toy("other.py::test_again", 2.4, HOST_NO_SME2), toy(node, 1.0, ANDROID)]
    return d


# -- LLMs measured as a generation (issue 30) ------------------------------------------------

QEMU_SME2 = {"kind": "qemu", "serial": "qemu-aarch64", "model": "QEMU -cpu max",
             "cpu": "QEMU max (emulated)", "abi": "arm64-v8a", "os": "Linux", "kernel": "6.1",
             "cores": 2, "sme": True, "sme2": True, "executorch": "1.5.1",
             "extra": {"emulated": True}}
KAI = "kai_run_matmul_clamp_f32_"
# The kernels issue 30 traced on QEMU: 8da4w's int4 NEON ones, 8da8w's int8 SME2 ones.
INT4_PREFILL = (KAI + "qai8dxp4x8_qsi4c32p4x8_16x4x32_neon_i8mm",
                KAI + "qai8dxp1x8_qsi4c32p4x8_1x4x32_neon_dotprod")
INT4_DECODE = (KAI + "qai8dxp1x8_qsi4c32p4x8_1x4x32_neon_dotprod",)
INT8_PREFILL = (KAI + "qai8dxp1vlx4_qsi8cxp4vlx4_1vlx4vl_sme2_mopa",)
INT8_DECODE = (KAI + "qai8dxp1x4_qsi8cxp4vlx4_1x4vl_sme2_dot",)


def traced(names, verdict: str | None = None) -> dict[str, Any]:
    """Kernel evidence from a phase-only process's QEMU trace that executed ``names``."""
    from pytest_sme2.analysis.isa import isa_family, kernel_isa

    families = [isa_family(kernel_isa(n)) for n in names]
    sme2 = "SME2" in families
    executed = [{"name": n, "isa_family": f, "kind": "kleidiai", "library": "kleidiai",
                 "blocks": 12} for n, f in zip(names, families)]
    return evidence(verdict or ("proven" if sme2 else "absent"),
                    "SME2 kernels executed" if sme2 else "no SME2 kernel executed",
                    executed=executed, streaming_blocks=40 if sme2 else 0)


def phase(name: str, tokens: int, executes: int, median_ms: float, *, generations: int = 10,
          token_ms: float | None = None, categories: dict | None = None,
          ev: dict | None = None) -> dict[str, Any]:
    """One ``PhaseStats`` as results.json holds it: round figures from ``median_ms``."""
    cats = dict(categories or {"GEMM": 0.6 * median_ms, "Data Movement": 0.2 * median_ms})
    cats["Other"] = median_ms - sum(cats.values())
    return {"phase": name, "tokens": tokens, "executes": executes, "generations": generations,
            "median_ms": median_ms, "p90_ms": 1.1 * median_ms, "cv_pct": 4.0,
            "tokens_per_s": 1e3 * tokens / median_ms,
            "token_median_ms": token_ms, "token_p90_ms": None if token_ms is None else
            1.2 * token_ms, "token_cv_pct": None if token_ms is None else 6.0,
            "categories_ms": cats, "kernel_evidence": ev,
            # the phase's time in each timed generation, their mean the median given
            "samples_ms": steady(median_ms, generations, jitter=0.04)}


def generation_block(scheme: str = "8da4w", runner: str = "native", *, model: str = "tiny_llama",
                     prompt: int = 64, new: int = 32, prefill_ms: float = 16.0,
                     token_ms: float = 1.0, prefill_kernels=INT4_PREFILL,
                     decode_kernels=INT4_DECODE, device: dict | None = None,
                     block: int | None = None, labels: dict | None = None,
                     generations: int = 10, nodeid: str | None = None,
                     depth: int = 0) -> dict[str, Any]:
    """A generation block as ``BlockResult.to_json()`` writes it (``e2e_ms`` shortened to one
    decode time per token of each timed generation; a session's holds every decode step's),
    the analysis of the decode executes, ``generation``
    both phases (prefill in one execute), their kernel evidence from ``*_kernels`` (None: no
    evidence)."""
    decode_ms = token_ms * new
    pre_ev = traced(prefill_kernels) if prefill_kernels is not None else None
    dec_ev = traced(decode_kernels) if decode_kernels is not None else None
    at = f"-d{depth}" if depth else ""
    nodeid = nodeid or f"benchmarks/test_llm.py::test_llm[{model}-{scheme}-t1{at}]"
    b = benchmark(nodeid, runner, steady(token_ms, generations),
                  {"GEMM": 0.5 * token_ms, "Data Movement": 0.3 * token_ms},
                  [op("Fully Connected (NC, QP8, F32, QC4W) #1", 0.5 * token_ms, token_ms,
                      "GEMM")],
                  model=model, dtype=scheme, device=device or HOST_NO_SME2,
                  ev=dec_ev or evidence("unknown"), block=block, labels=labels, warmup=2)
    b["generation"] = {
        "prompt_tokens": prompt, "new_tokens": new, "dynamic_shape": True,
        "depth": depth, "depth_executes": -(-depth // 127),
        "depth_ms": 0.18 * depth if depth else None,
        "generations": generations, "warmup": 2,
        "prefill": phase("prefill", prompt, 1, prefill_ms, generations=generations,
                         categories={"GEMM": 0.8 * prefill_ms,
                                     "Data Movement": 0.1 * prefill_ms}, ev=pre_ev),
        "decode": phase("decode", new, new, decode_ms, generations=generations,
                        token_ms=token_ms, ev=dec_ev),
        "ttft_ms": prefill_ms + 0.05, "sampling_ms": 0.1 * (new + 1),
        "generation_ms": prefill_ms + decode_ms + 0.1 * (new + 1),
        "tokens": [(7 * i + 3) % 512 for i in range(new + 1)], "max_seq_len": 128,
        "max_context_len": max(128, depth + prompt + new), "vocab_size": 512,
        "source": f"/tmp/{scheme}.etdump"}
    return b


def llm_doc(*, device: dict | None = None) -> dict[str, Any]:
    """Two schemes of ``tiny_llama``: 8da4w ran NEON int4 kernels in both phases (traced),
    8da8w ran SME2 mopa in prefill and SME2 dot in decode; plus a forward-pass benchmark."""
    d = single_doc()
    d["benchmarks"] += [
        generation_block("8da4w", device=device),
        generation_block("8da8w", prefill_ms=8.0, token_ms=0.5, prefill_kernels=INT8_PREFILL,
                         decode_kernels=INT8_DECODE, device=device)]
    return d
