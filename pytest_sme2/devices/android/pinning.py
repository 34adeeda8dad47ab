"""Pinning proven, not assumed (issue 38, part 4): a pinned run on a phone writes its runner's
pid, and a reader beside it waits until the runner has started its threads, then copies every
thread's ``Cpus_allowed_list`` from ``/proc/<pid>/task/*/status``. After the run the lines are
checked against the taskset mask: a thread allowed a CPU outside it means the mask did not
apply (llama.cpp's ``-C`` was silently ignored on Android for months, #26836), and the block
fails in one line. POSIX sh and toybox only.
"""

from __future__ import annotations

import shlex
import tempfile
from pathlib import Path

from pytest_sme2.devices.android.facts import parse_cpu_list

AFFINITY_FILE = "affinity.txt"
PID_FILE = "runner.pid"
POLL_S, POLLS = 0.02, 250          # wait up to 5 s for the runner's threads


def pinned_command(prefix: str, mask: str, argv: list[str], out_dir: str, threads: int) -> str:
    """``prefix`` (the environment and ``timeout``) running ``argv`` through
    ``sh -c 'echo $$ > pid; exec taskset mask ...'`` (taskset execs the runner: it keeps that
    pid), with the reader
    of its threads' affinity in the background; the runner's exit status is the command's."""
    q = shlex.quote
    pid, aff = f"{out_dir}/{PID_FILE}", f"{out_dir}/{AFFINITY_FILE}"
    start = f"echo $$ > {q(pid)}; exec taskset {q(mask)} \"$@\""
    reader = (f"rm -f {q(pid)} {q(aff)}; (i=0; r=; while [ $i -lt {POLLS} ]; do "
              f"sleep {POLL_S}; i=$((i+1)); r=$(cat {q(pid)} 2>/dev/null); "
              f"[ -n \"$r\" ] && {{ [ ! -d /proc/$r ] || "
              f"[ \"$(ls /proc/$r/task 2>/dev/null | wc -l)\" -ge {threads} ]; }} "
              f"&& break; done; [ -n \"$r\" ] && grep -h Cpus_allowed_list "
              f"/proc/$r/task/*/status > {q(aff)} 2>/dev/null) & ")
    return (f"{reader}{prefix} sh -c {q(start)} sh "
            f"{' '.join(q(a) for a in argv)}; rc=$?; wait; exit $rc")


def mask_cpus(mask: str) -> set[int]:
    value = int(mask, 16)
    return {c for c in range(value.bit_length()) if value >> c & 1}


def pinning_problem(text: str, mask: str) -> str | None:
    """What the reader copied, against the mask: None when every thread's allowed CPUs lie
    inside it (or nothing was read: a runner that ended first), else the problem."""
    allowed = [parse_cpu_list(line.partition(":")[2]) for line in text.splitlines()
               if line.startswith("Cpus_allowed_list")]
    wanted = mask_cpus(mask)
    outside = sorted({c for cpus in allowed for c in cpus} - wanted)
    if not allowed or not outside:
        return None
    seen = ",".join(sorted({line.partition(":")[2].strip() for line in text.splitlines()
                            if line.startswith("Cpus_allowed_list")}))
    return (f"taskset mask {mask} (CPUs {','.join(map(str, sorted(wanted)))}) did not apply: "
            f"its {len(allowed)} thread(s) were allowed CPUs {seen} (/proc/<pid>/task/*/status)")


def read_pinning(adb, session_dir: str, mask: str) -> str | None:
    """Pull what the reader copied and check it (:func:`pinning_problem`), with what to do."""
    local = Path(tempfile.mkdtemp(prefix="pytest-sme2-affinity-")) / AFFINITY_FILE
    if not adb.pull(f"{session_dir}/out/{AFFINITY_FILE}", local, required=None):
        return None
    problem = pinning_problem(local.read_text(), mask)
    return f"{problem}; fix --sme2-taskset or pass none" if problem else None
