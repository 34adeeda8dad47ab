"""The machine's speed as the probe saw it (pytest_sme2.analysis.machine_state): modes, pairs
that straddled two speeds, the session's states. Pure numbers, among them the real block
medians of a VM that switched between two speeds (tests/data/speed_states)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from pytest_sme2.analysis.machine_state import (describe_modes, describe_states, find_modes,
                                                session_states, straddle)
from pytest_sme2.analysis.runner_summary import parse_summary
from pytest_sme2.results.machine import MachineStates, ProbeReading

DATA = Path(__file__).parents[2] / "data" / "speed_states"


def _reading(level: float, moved: float = 1.0) -> ProbeReading:
    return ProbeReading([level] * 24, [level * moved] * 24)


def test_one_speed_is_one_mode_however_noisy():
    rng = random.Random(1)
    values = [0.107 * rng.lognormvariate(0, 0.05) for _ in range(200)]
    modes = find_modes(values)
    assert len(modes) == 1 and modes[0].count == 200 and modes[0].share == 1.0
    assert describe_modes(modes) == ""


def test_a_tail_of_slow_runs_is_not_a_second_speed():
    # 28 runs at one speed and two interrupted ones: a tail, not a mode
    assert len(find_modes([0.1] * 14 + [0.102] * 14 + [0.3, 0.35])) == 1


def test_the_real_blocks_of_a_two_speed_machine_fall_into_two_speeds():
    d = json.loads((DATA / "runners_agree_40_pairs.json").read_text())
    modes = find_modes(d["candidate_block_medians_ms"])       # native's 40 block medians
    assert len(modes) == 2
    fast, slow = modes
    assert fast.centre == pytest.approx(0.107, abs=0.003)
    assert slow.centre == pytest.approx(0.19, abs=0.01)
    assert fast.count + slow.count == 40 and min(fast.share, slow.share) > 0.4
    text = describe_modes(modes)
    assert text.startswith("two speeds: ") and text.endswith("(1.8x)")
    assert f"{fast.share:.0%} at {fast.centre:.3f} ms" in text


def test_a_pair_straddles_when_its_blocks_ran_at_two_speeds_or_one_block_moved():
    assert straddle(_reading(14.0), _reading(14.5)) is None          # one speed, probe noise
    assert straddle(_reading(14.0), _reading(25.0)) == pytest.approx(25 / 14)
    assert straddle(_reading(14.0), _reading(14.0, moved=1.6)) == pytest.approx(1.6)
    assert straddle(_reading(14.0), None) is None                     # not probed: unknown


def test_the_session_states_place_every_block_and_say_so_in_one_line():
    readings = [_reading(14.0)] * 7 + [_reading(25.0)] * 3 + [_reading(14.0, moved=1.7)]
    machine = session_states(readings)
    assert machine.probed == 11 and machine.moved == 1 and machine.changed_speed
    assert [r.state for r in readings] == [0] * 7 + [1] * 3 + [None]
    line = describe_states(machine)
    assert line == ("the machine changed speed (11 blocks probed): two speeds 1.8x apart: 64% "
                    "at the fastest, 36% of blocks at 1.79x the fastest's probe time; 1 block(s) "
                    "saw it move during their runs")
    steady = session_states([_reading(14.0)] * 5)
    assert not steady.changed_speed and describe_states(steady) == ""


def test_each_runner_reads_the_machine_against_its_own_probe_time():
    """The Python runtime times the same GEMM ~60% slower than our native runner (its
    binding's microseconds): two runners at one machine speed are one speed."""
    native, python = [_reading(4.5)] * 5, [_reading(7.3)] * 5
    assert not session_states(native + python, ["native"] * 5 + ["python"] * 5).changed_speed
    assert session_states(native + python).changed_speed          # one group: two "speeds"
    assert straddle(_reading(4.5), _reading(7.3), 4.5, 7.3) is None
    assert straddle(_reading(4.5), _reading(13.1), 4.5, 7.3) == pytest.approx(1.79, abs=0.01)


def test_nothing_probed_says_why():
    machine = session_states([None, None], note="not probed: an emulated CPU")
    assert machine.probed == 0 and describe_states(machine) == "not probed: an emulated CPU"
    assert MachineStates.from_dict(machine.to_dict()).note == machine.note


def test_a_runners_summary_carries_its_probe():
    line = ('{"threads": 1, "executions": 33, "probe": {"rss_kb": 120, '
            '"before_us": [4.5, 4.6, 4.4], "after_us": [4.7, 4.6, 4.8]}}')
    probe = parse_summary(line).probe
    assert probe.before == pytest.approx(4.5) and probe.after == pytest.approx(4.7)
    assert probe.level == pytest.approx(4.6) and probe.moved == pytest.approx(4.7 / 4.5)
    assert ProbeReading.from_dict(probe.to_dict()) == probe
    assert parse_summary('{"threads": 1}').probe is None
