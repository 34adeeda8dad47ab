"""An export's memory check (one line before a machine that cannot hold it) and its progress
lines (tests/integration/test_export.py runs a real export with them)."""

from __future__ import annotations

import pytest

from pytest_sme2.programs.export_watch import (BYTES_PER_PARAMETER, ExportWatch, check_memory,
                                               current_rss, mem_available, memory_needed,
                                               parameter_count, peak_rss)
from pytest_sme2.programs.exported import ExportError
from pytest_sme2.units import byte_size

GB = 10**9


def test_the_machine_and_this_process_are_read_from_proc():
    assert mem_available() is not None and mem_available() > 0
    assert current_rss() > 0 and peak_rss() > 0


def test_an_export_the_machine_cannot_hold_is_one_line_naming_both_sizes():
    params = 750_000_000
    need = memory_needed(params, "8da8w")
    assert need == int(params * BYTES_PER_PARAMETER["8da8w"])
    check_memory("m as 8da8w", params, "8da8w", available=need, held=0)       # fits
    check_memory("m as 8da8w", params, "8da8w", available=need - GB, held=GB)  # held counts
    with pytest.raises(ExportError) as ei:
        check_memory("m as 8da8w", params, "8da8w", available=2 * GB, held=GB)
    msg = str(ei.value)
    assert "\n" not in msg
    assert msg.startswith(f"exporting m as 8da8w needs about {byte_size(need)} of memory at "
                          f"its peak (750M parameters x {BYTES_PER_PARAMETER['8da8w']:g} B, "
                          "measured) but this machine has 2.0 GB available (MemAvailable) "
                          "beside the 1.0 GB this process holds")


def test_parameters_and_buffers_are_counted_once():
    import torch  # torch: a dependency of the project; kept off the module's import time

    lin = torch.nn.Linear(4, 3)
    module = torch.nn.Sequential(lin, lin)
    module.register_buffer("cache", torch.zeros(5))
    assert parameter_count(module) == 4 * 3 + 3 + 5


def test_each_stage_is_said_with_its_time_and_a_long_one_again():
    said, now = [], [0.0]
    watch = ExportWatch(said.append, "m 8da8w", every=30, clock=lambda: now[0])
    now[0] = 2.5
    watch.stage("quantize")
    now[0] = 40
    watch.beat()
    assert said[0] == "  m 8da8w: quantize (2.5 s)"
    assert said[1].startswith("  m 8da8w: still at quantize (40 s, ") and "resident)" in said[1]
