"""Counting instructions per Method::execute: reading callgrind profiles (hand-written fixtures
in tests/unit/callgrind/, described in its README), the slope between two processes, and the
one-line errors (valgrind missing or too old, a device that cannot count). A runner killed or
failing under the real valgrind: tests/integration/test_instruction_counts.py."""

from __future__ import annotations

import os
from collections import Counter
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pytest_sme2.errors import Sme2Error
from pytest_sme2.instructions import count as ins
from pytest_sme2.instructions.callgrind import (CallgrindFormatError, Costs, read_profile,
                                           read_profiles)
from pytest_sme2.instructions.count import (HOST_ONLY, METHOD_EXECUTE, InstructionCount,
                                              InstructionCountError, count_instructions,
                                              find_valgrind, host_only_reason, short_name,
                                              summarize)
from pytest_sme2.runners.base import RunRequest
from pytest_sme2.results.device import RunnerInfo
from tests.needs import tool

FIXTURES = Path(__file__).parent / "callgrind"
XNN = "/x/lib/libexecutorch_backend_xnnpack.so"
ET = "/x/lib/libexecutorch.so"
POOL = "/x/lib/libexecutorch_threadpool.so"
KERNEL = "0x00000000000ffcc0"


def _costs(stem: str, threads: int) -> tuple[Costs, Costs]:
    profiles = read_profiles(FIXTURES.glob(f"{stem}.out-*"))
    return (Costs.of(p for p in profiles if p.thread == 1),
            Costs.of(p for p in profiles if p.thread != 1 and threads > 1))


# -- the callgrind format --------------------------------------------------------------------


def test_self_costs_add_up_to_the_summary_and_names_are_decompressed():
    p = read_profile(FIXTURES / "n2.out-01")
    assert (p.part, p.thread, p.trigger) == (1, 1, "Program termination")
    assert p.total == p.summary == 2460
    assert p.self_cost[(XNN, KERNEL)] == 1800          # "0 1000" and "+1 800", fn=(4) reused
    assert p.self_cost[(ET, METHOD_EXECUTE)] == 20
    per_object = Counter()
    for (obj, _), cost in p.self_cost.items():
        per_object[obj] += cost
    assert per_object == {ET: 60, XNN: 2000, "/x/lib/libexecutorch_kernels_optimized.so": 300,
                          POOL: 100}


def test_call_lines_are_inclusive_costs_of_the_callee_not_self_costs():
    costs = Costs.of([read_profile(FIXTURES / "n2.out-01")])
    # a call's cob= names the callee's object for that call only; the next call without one
    # is to the caller's object (fn=(5) is defined in the kernels library, fn=(6) too)
    assert costs.calls[(ET, METHOD_EXECUTE)] == {
        (ET, "executorch::runtime::Method::execute_instruction()"): 2440}
    assert costs.inclusive((ET, METHOD_EXECUTE)) == 2460 == costs.total
    assert costs.inclusive((XNN, KERNEL)) == 1900      # 1800 own + 100 in the pool


@pytest.mark.parametrize("name", ["n2.out-01", "n2.out-02", "n4.out-01", "n4.out-02"])
def test_fixtures_read_like_callgrind_annotate(name):
    """valgrind's own reader agrees with ours on every fixture: they are valid profiles."""
    tool("callgrind_annotate", "apt-get install valgrind")
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", str(FIXTURES / name)],
                         capture_output=True, text=True, check=True).stdout
    costs = Costs.of([read_profile(FIXTURES / name)])
    for fn_key in costs.self_cost:
        shown = f"{costs.inclusive(fn_key):,}"
        assert any(shown in line and fn_key[1] in line for line in out.splitlines()), fn_key


def test_several_events_and_instruction_positions(tmp_path):
    f = tmp_path / "callgrind.out"
    f.write_text("# callgrind format\nversion: 1\npositions: instr line\nevents: Dr Ir\n"
                 "summary: 9 12\nob=/lib/a.so\nfn=f\n0x10 3 1 5\n+2 +1 2 7\n* * 6\n")
    p = read_profile(f)
    assert p.self_cost == {("/lib/a.so", "f"): 12}      # the Ir column; a missing count is 0
    assert read_profile(f, event="Dr").total == 9


def test_empty_files_are_skipped(tmp_path):
    (tmp_path / "callgrind.out").write_text("")       # what --separate-threads leaves behind
    shutil.copy(FIXTURES / "n2.out-01", tmp_path / "callgrind.out-01")
    assert [p.thread for p in read_profiles(tmp_path.glob("callgrind.out*"))] == [1]


@pytest.mark.parametrize("text, message", [
    ("hello world\n", "unexpected line 'hello world'"),
    ("# callgrind format\nfn=f\n0 1\n", "a cost line before the 'events:' line"),
    ("# callgrind format\nevents: Dr\nfn=f\n0 1\n", "records the events 'Dr', not 'Ir'"),
    ("# callgrind format\nevents: Ir\nfn=(3)\n0 1\n", "fn=(3) is used before it is named"),
    ("# callgrind format\nevents: Ir\nsummary: 50\nfn=f\n0 10\n",
     "self costs add up to 10 Ir, the file's summary says 50; truncated or corrupt"),
    ("# callgrind format\nevents: Ir\nfn=f\n0 ten\n", "cost 'ten' is not an integer"),
])
def test_malformed_profiles_are_one_line(tmp_path, text, message):
    f = tmp_path / "bad.out"
    f.write_text(text)
    with pytest.raises(CallgrindFormatError) as e:
        read_profile(f)
    assert message in str(e.value) and str(f) in str(e.value) and "\n" not in str(e.value)


def test_a_missing_profile_is_one_line(tmp_path):
    with pytest.raises(CallgrindFormatError, match="cannot read the callgrind profile"):
        read_profile(tmp_path / "nope.out")


# -- from two processes to one count ----------------------------------------------------------


def test_one_thread_slope_leaves_out_the_first_execution_and_the_pool():
    c = summarize(_costs("n2", 1), _costs("n4", 1), 2, 4, threads=1, wall_s=1.5,
                  valgrind="3.19.0")
    # 10 + 20 + 50 + 900 + 5 + 145: the first execution's extra 100 cancels in the slope
    assert c.per_execute == 1130
    assert c.executions == 2 and c.threads == 1
    assert c.excluded == {"libexecutorch_threadpool.so": 15}
    assert c.per_library == {"libexecutorch_backend_xnnpack.so": 950,
                             "libexecutorch_kernels_optimized.so": 150,
                             "libexecutorch.so": 30, "libexecutorch_threadpool.so": 15}
    assert c.hottest[0] == (f"{KERNEL} [libexecutorch_backend_xnnpack.so]", 900)
    assert c.hottest[1] == ("torch::executor::native::_adaptive_avg_pool2d_out "
                            "[libexecutorch_kernels_optimized.so]", 145)
    # the unnamed kernel wrapper is named by the kernel it calls; the delegate is one entry
    assert c.per_operator == {"XnnpackBackend delegate": 965, "_adaptive_avg_pool2d_out": 150}
    assert "libexecutorch_threadpool.so, 15 per execute" in c.deterministic_note
    assert "slope of 2 -> 4 executions" in c.method


def test_two_threads_add_the_workers_and_leave_out_their_spinning():
    c = summarize(_costs("n2", 2), _costs("n4", 2), 2, 4, threads=2)
    assert c.per_execute == 1130 + 450                 # the worker's (1500 - 600) / 2
    assert c.excluded == {"libexecutorch_threadpool.so": 15 + 100}
    assert c.per_operator["pool workers (operator not known)"] == 450
    assert c.deterministic_note.startswith("2 threads: the calling thread")


def test_the_count_round_trips_through_json():
    c = summarize(_costs("n2", 2), _costs("n4", 2), 2, 4, threads=2)
    import json

    assert InstructionCount.from_dict(json.loads(json.dumps(c.to_dict()))) == c


def test_a_method_never_entered_is_an_error():
    empty = (Costs(), Costs())
    with pytest.raises(InstructionCountError, match="nothing was counted inside "
                       r"executorch::runtime::Method::execute\(\) in a run of 2 execution"):
        summarize(empty, _costs("n4", 1), 2, 4, threads=1)


def test_workers_not_seen_at_two_threads_is_an_error():
    with pytest.raises(InstructionCountError, match="no instruction of the thread pool's "
                       "workers was counted at 2 threads"):
        summarize(_costs("n2", 1), _costs("n4", 1), 2, 4, threads=2)


def test_no_more_instructions_for_more_executions_is_an_error():
    with pytest.raises(InstructionCountError, match="4 executions counted no more"):
        summarize(_costs("n4", 1), _costs("n2", 1), 2, 4, threads=1)


@pytest.mark.parametrize("name, short", [
    ("executorch::runtime::Method::execute()", "executorch::runtime::Method::execute"),
    ("f(std::vector<int, std::allocator<int> > const&) const", "f"),
    ("(anonymous namespace)::run((anonymous namespace)::Options const&)",
     "(anonymous namespace)::run"),
    ("0x00000000000ffcc0", "0x00000000000ffcc0"),
    ("(below main)", "(below main)"),
])
def test_short_names_drop_the_parameter_list(name, short):
    assert short_name(name) == short


# -- one-line errors ----------------------------------------------------------------------------


def _script(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!{sys.executable}\n{body}")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_valgrind_missing_names_the_package(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))          # nothing on PATH at all
    with pytest.raises(InstructionCountError) as e:
        find_valgrind()
    assert str(e.value) == (
        "instructions are counted with valgrind, which is not on PATH: install the Debian "
        "package 'valgrind' (apt-get install valgrind) or measure time only")


def test_valgrind_too_old_names_the_package(tmp_path, monkeypatch):
    _script(tmp_path / "bin", "valgrind", "print('valgrind-3.13.0')\n")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    with pytest.raises(InstructionCountError) as e:
        find_valgrind()
    assert "valgrind 3.13.0" in str(e.value) and "too old to count instructions (3.18 or " \
        "newer needed): install a newer Debian package 'valgrind'" in str(e.value)


def test_not_a_valgrind_is_refused(tmp_path, monkeypatch):
    _script(tmp_path / "bin", "valgrind", "print('hello')\n")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    with pytest.raises(InstructionCountError, match="not a valgrind version; install the "
                       "Debian package 'valgrind'"):
        find_valgrind()


@dataclass
class _Device:
    spec: str
    target: str


@pytest.mark.parametrize("device, reason", [
    (_Device("host", "host"), None),
    (_Device("android", "android"), f"--device android: {HOST_ONLY}"),
    (_Device("android:SER@127.0.0.1:5555", "host"),     # a fake phone that runs host programs
     f"--device android:SER@127.0.0.1:5555: {HOST_ONLY}"),
    (_Device("qemu", "aarch64-linux-gnu"), f"--device qemu: {HOST_ONLY}"),
])
def test_only_the_host_counts(device, reason):
    assert host_only_reason(device) == reason
    assert HOST_ONLY == "instructions are counted on the host only; measuring time only"


@dataclass
class _ShellRunner:
    """A runner whose process is ``sh -c SCRIPT``."""

    script: str
    binary: Path = Path("/bin/sh")
    libs: tuple = ()
    info: RunnerInfo = field(default_factory=lambda: RunnerInfo("native", "native"))

    def command(self, request: RunRequest) -> list[str]:
        return ["/bin/sh", "-c", self.script]


def test_a_runner_without_method_execute_is_refused(tmp_path):
    binary = tmp_path / "runner"
    shutil.copy("/bin/true", binary)
    tool("nm", "apt-get install binutils")
    with pytest.raises(InstructionCountError, match=r"runner define no executorch::runtime::"
                       r"Method::execute\(\) \(_ZN10executorch7runtime6Method7executeEv\)"):
        ins.execute_symbol(binary)


def test_the_wheel_names_method_execute():
    lib = Path(sys.prefix, "lib", f"python{sys.version_info[0]}.{sys.version_info[1]}",
               "site-packages", "executorch", "lib", "libexecutorch.so")
    tool("nm", "apt-get install binutils")
    assert lib.is_file(), f"{lib}: the installed executorch wheel ships no libexecutorch.so"
    assert ins.execute_symbol(Path("/bin/true"), [lib]) == METHOD_EXECUTE


def test_a_hung_runner_is_killed_at_the_time_limit(tmp_path, monkeypatch):
    _script(tmp_path / "bin", "valgrind", "import sys, time\n"
            "print('valgrind-3.19.0') if '--version' in sys.argv else time.sleep(60)\n")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(ins, "execute_symbol", lambda binary, libs=(): METHOD_EXECUTE)
    pte = tmp_path / "m.pte"
    pte.write_bytes(b"\0")
    with pytest.raises(InstructionCountError, match="gave no count within 1 s; killed"):
        count_instructions(pte, runner=_ShellRunner("true"), timeout_s=1)


@pytest.mark.parametrize("kwargs, message", [
    ({"threads": 0}, "threads must be 1 or more, got 0"),
    ({"executions": (3, 3)}, r"executions must be two counts 1 <= low < high, got \(3, 3\)"),
])
def test_bad_arguments(tmp_path, kwargs, message):
    with pytest.raises(InstructionCountError, match=message):
        count_instructions(tmp_path / "m.pte", **kwargs)


def test_a_missing_model_is_one_line(tmp_path):
    with pytest.raises(InstructionCountError, match=r"m\.pte: model file not found"):
        count_instructions(tmp_path / "m.pte")


def test_errors_are_sme2_errors():
    assert issubclass(InstructionCountError, Sme2Error)
    assert issubclass(CallgrindFormatError, Sme2Error)
