"""A long step says it is still running, and only after ``every`` seconds without a line."""

from __future__ import annotations

from pytest_sme2._util.heartbeat import Heartbeat


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_line_comes_only_after_every_seconds_of_silence():
    said, clock = [], _Clock()
    beat = Heartbeat(said.append, lambda s: f"still running ({s:.0f} s)", every=30, clock=clock)
    clock.now = 29
    beat.beat()
    assert said == []
    clock.now = 30
    beat.beat()
    assert said == ["still running (30 s)"]
    clock.now = 45
    beat.say("stage two")                     # a line of the step's own restarts the wait
    clock.now = 74
    beat.beat()
    assert said == ["still running (30 s)", "stage two"]
    clock.now = 75
    beat.beat()
    assert said[-1] == "still running (75 s)"


def test_the_thread_stops_when_the_step_ends_and_no_sayer_means_no_thread():
    said: list[str] = []
    with Heartbeat(said.append, lambda s: "still", every=0.01) as beat:
        assert beat._thread is not None and beat._thread.is_alive()
    assert not beat._thread.is_alive()
    with Heartbeat(None, lambda s: "still", every=0.01) as quiet:
        assert quiet._thread is None
