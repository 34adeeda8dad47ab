"""Our reader against ExecuTorch's Inspector on a real ETDump from the real runtime."""

import pytest

from pytest_sme2.analysis.latency import e2e_per_run
from pytest_sme2.devices.host import HostDevice
from pytest_sme2.readers.etdump import read_etdump
from pytest_sme2.runners.python import PythonRunner
from pytest_sme2.runners.base import RunRequest


@pytest.fixture(scope="module")
def toy_trace(toy_export, tmp_path_factory):
    out = tmp_path_factory.mktemp("trace") / "toy.etdump"
    HostDevice().run(PythonRunner(), RunRequest(pte=toy_export.pte, etdump=out, runs=12,
                                                warmup=0, inputs=toy_export.inputs))
    return out


def test_method_execute_matches_inspector_per_run(toy_trace, toy_export):
    from executorch.devtools import Inspector

    ours = e2e_per_run(read_etdump(toy_trace)).tolist()
    df = Inspector(etdump_path=str(toy_trace), etrecord=str(toy_export.etrecord)).to_dataframe()
    theirs = df.loc[df.event_name == "Method::execute", "raw"].iloc[0]
    assert len(ours) == len(theirs) == 12
    assert ours == pytest.approx(list(theirs), abs=1e-3)


def test_delegated_op_durations_match_inspector(toy_trace, toy_export):
    from executorch.devtools import Inspector

    events = read_etdump(toy_trace)
    df = Inspector(etdump_path=str(toy_trace), etrecord=str(toy_export.etrecord)).to_dataframe()
    rows = df[df.is_delegated_op & (df.event_block_name == "Execute")]
    # Inspector keeps one row per (delegate occurrence, name); so do we via instruction_id.
    ours = (events[events.delegated & (events.run >= 0)]
            .groupby(["instruction_id", "name"], sort=False)["duration_ms"].apply(list))
    assert len(ours) == len(rows)
    for (_, name), durations in ours.items():
        matching = [list(r) for n, r in zip(rows.event_name, rows.raw) if n == name]
        assert any(durations == pytest.approx(m, abs=1e-3) for m in matching), name
