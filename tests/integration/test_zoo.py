"""Every built-in model in every dtype: exported through the cache, run by the real runtime, and
analysed — with our numbers checked against ExecuTorch's own Inspector on the same trace."""

import json
from collections import defaultdict

import pytest

from pytest_sme2.analysis.categories import is_framework_event
from pytest_sme2.analysis.summary import analyze_file
from pytest_sme2.devices.host import HostDevice
from pytest_sme2.programs.export import DTYPES, TOLERANCE, export_model
from pytest_sme2.runners.base import RunRequest
from pytest_sme2.runners.python import PythonRunner


MODELS = ["toy_cnn", "mobilenet_v3_small", "vit_tiny"]
CASES = [(m, d) for m in MODELS for d in DTYPES]
RUNS, WARMUP = 6, 2


@pytest.fixture(scope="module")
def traced(export_cache, tmp_path_factory):
    """(model, dtype) -> (export, etdump), each made once per session."""
    made = {}

    def get(model, dtype):
        if (model, dtype) not in made:
            exported = export_model(model, dtype, export_cache)
            out = tmp_path_factory.mktemp(f"{model}-{dtype}") / "trace.etdump"
            HostDevice().run(PythonRunner(), RunRequest(
                pte=exported.pte, etdump=out, runs=RUNS, warmup=WARMUP, inputs=exported.inputs,
                outputs=out.with_name("outputs.bin")))
            made[model, dtype] = (exported, out)
        return made[model, dtype]

    return get


@pytest.mark.parametrize("model,dtype", [pytest.param(m, d, id=f"{m}-{d}",
                                                    marks=pytest.mark.exports((m, d)))
                                       for m, d in CASES])
def test_export_run_and_match_inspector(traced, model, dtype):
    from executorch.devtools import Inspector

    exported, trace = traced(model, dtype)
    meta = json.loads((exported.folder / "meta.json").read_text())
    assert meta["delegates"] >= 1
    assert meta["max_abs_error"] <= TOLERANCE[dtype] * meta["max_abs_eager"]

    a = analyze_file(trace, warmup=WARMUP, etrecord=exported.etrecord)
    df = Inspector(etdump_path=str(trace), etrecord=str(exported.etrecord)).to_dataframe()
    execute = df[(df.event_block_name == "Execute") & (df.event_name == "Method::execute")]
    theirs = list(execute["raw"].iloc[0])
    assert len(theirs) == RUNS + WARMUP
    assert a.e2e_all.tolist() == pytest.approx(theirs, abs=1e-3)

    # Per-operator totals over the timed runs. Inspector keeps one row per event occurrence in
    # the program, we key by (instruction, name): compare, per name, the sorted totals.
    leaves = df[(df.event_block_name == "Execute") & ~df.event_name.map(is_framework_event)]
    theirs_by_name, ours_by_name = defaultdict(list), defaultdict(list)
    for name, raw in zip(leaves.event_name, leaves.raw):
        theirs_by_name[name].append(sum(raw[WARMUP:]) / RUNS)
    for r in a.operators.itertuples():
        ours_by_name[r.name].append(r.mean_ms_per_run)
    assert ours_by_name.keys() == theirs_by_name.keys()
    for name, values in ours_by_name.items():
        assert sorted(values) == pytest.approx(sorted(theirs_by_name[name]), abs=1e-6), name

    assert sum(a.categories_ms.values()) == pytest.approx(a.e2e.mean_ms, rel=5e-3)
    backends = set(a.operators.loc[a.operators.delegated, "backend"])
    assert backends == {"XnnpackBackend"}


@pytest.mark.exports(("mobilenet_v3_small", "fp32"))
def test_portable_ops_surface_in_the_report(traced):
    """MobileNetV3's nn.Hardsigmoid leaves int64 casts outside the delegate (docs/onboarding.md,
    "the Hardsigmoid lesson"): the analysis must show them as portable operators, not hide
    them."""
    exported, trace = traced("mobilenet_v3_small", "fp32")
    a = analyze_file(trace, warmup=WARMUP, etrecord=exported.etrecord)
    portable = a.operators[~a.operators.delegated]
    assert len(portable) == 18
    assert set(portable.name) == {"native_call__to_dim_order_copy.out"}
    # The ETRecord traces each cast back to the Hardsigmoid module that produced it.
    assert all(paths and paths[0].endswith("scale_activation") for paths in portable.module_paths)


@pytest.mark.exports(("toy_cnn", "fp32"))
def test_outputs_equal_between_runs_of_the_same_program(traced):
    from pytest_sme2.readers.tensorfile import read_tensors

    exported, trace = traced("toy_cnn", "fp32")
    (out,) = read_tensors(trace.with_name("outputs.bin"))
    assert out.shape == (1, 10) and str(out.dtype) == "float32"
