"""Which runner a benchmark that names none gets: on the host the native runner where it can be
made, else the Python runtime with one line saying why; the session closes its runners."""

from __future__ import annotations

from pytest_sme2.runners.base import with_defaults
from pytest_sme2.runners.base import RunnerError
from pytest_sme2.runners.spec import RunnerSpec
from pytest_sme2.measure.session import BenchSession
from pytest_sme2.measure.config import Sme2Config


def test_the_host_default_is_the_native_runner_when_it_can_be_made(monkeypatch):
    made: list[str] = []
    monkeypatch.setattr(RunnerSpec, "make", lambda self, progress=None, target="host",
                        hook=None: made.append(self.name))
    session = BenchSession()
    assert session.default_runner() == "native"
    assert made == ["native"]


def test_without_a_native_runner_the_host_default_is_python_said_once(monkeypatch):
    def cannot(self, progress=None, target="host", hook=None):
        raise RunnerError("no C++ compiler found (set CXX or install g++/clang++) to build the "
                          "native runner")

    monkeypatch.setattr(RunnerSpec, "make", cannot)
    session = BenchSession()
    said: list[str] = []
    assert session.default_runner(said.append) == "python"
    assert session.default_runner(said.append) == "python"
    assert said == ["benchmarks that name no runner use 'python': no C++ compiler found (set "
                    "CXX or install g++/clang++) to build the native runner"]


def test_other_devices_default_to_the_native_runner_without_building_here(monkeypatch):
    monkeypatch.setattr(RunnerSpec, "make", lambda *a, **k: (_ for _ in ()).throw(AssertionError))
    assert BenchSession(Sme2Config(devices=("android",))).default_runner() == "native"


def test_closing_the_session_closes_its_runners():
    closed: list[str] = []

    class Runner:
        def close(self) -> None:
            closed.append("python")

    session = BenchSession()
    session._runners = {"python": Runner(), "native": with_defaults(object())}
    session.close()
    assert closed == ["python"]
