"""Pinning proven (issue 38): the threads' Cpus_allowed_list against the taskset mask."""

from __future__ import annotations

from pytest_sme2.devices.android.pinning import pinned_command, pinning_problem


def test_threads_inside_the_mask_pass():
    text = "Cpus_allowed_list:\t4-7\nCpus_allowed_list:\t4-7\nCpus_allowed_list:\t6\n"
    assert pinning_problem(text, "f0") is None
    assert pinning_problem("", "f0") is None      # nothing read: the runner ended first


def test_a_mask_that_did_not_apply_is_one_line():
    text = "Cpus_allowed_list:\t0-7\nCpus_allowed_list:\t0-7\n"
    assert pinning_problem(text, "f0") == (
        "taskset mask f0 (CPUs 4,5,6,7) did not apply: its 2 thread(s) were allowed CPUs 0-7 "
        "(/proc/<pid>/task/*/status)")


def test_the_command_keeps_the_runners_pid_and_status():
    cmd = pinned_command("cd /d && X=1 timeout -k 2 10", "f0", ["/d/runner", "--a b"],
                         "/data/local/tmp/s/out", 4)
    assert "sh -c 'echo $$ > /data/local/tmp/s/out/runner.pid; exec taskset f0 \"$@\"' sh " \
           "/d/runner '--a b'" in cmd
    assert "-ge 4" in cmd and cmd.endswith("rc=$?; wait; exit $rc")
