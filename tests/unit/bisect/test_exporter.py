"""The pre-warmed exporter: each fork runs pytest in its commit's folder and imports that
commit's code, never a module an earlier commit left; a session past its time is killed."""

import pytest

from pytest_sme2.bisect.exporter import FreshSessions, SessionTimeout, WarmExporter

TEST = """import model

def test_value():
    open("seen.txt", "w").write(str(model.VALUE))
"""


@pytest.fixture(autouse=True)
def _bare_pytest(monkeypatch):
    """The sessions' pytest without the installed plugins: their start is not under test."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


def _commit(folder, value, test=TEST):
    folder.mkdir()
    (folder / "model.py").write_text(f"VALUE = {value}\n")
    (folder / "test_it.py").write_text(test)
    return folder


@pytest.mark.parametrize("make", [lambda tmp: WarmExporter(tmp, warm=("pytest",)),
                                  lambda tmp: FreshSessions()], ids=["warm", "fresh"])
def test_each_session_imports_its_own_commits_code(tmp_path, make):
    sessions = make(tmp_path)
    try:
        for value in (1, 2):
            folder = _commit(tmp_path / f"c{value}", value)
            rc = sessions.session(["-q", "-p", "no:cacheprovider", "test_it.py"], folder,
                                  folder / "log", 60)
            assert rc == 0, (folder / "log").read_text()
            assert (folder / "seen.txt").read_text() == str(value)
        broken = _commit(tmp_path / "broken", "(")
        assert sessions.session(["-q", "-p", "no:cacheprovider"], broken, broken / "log",
                                60) == 2
        assert "SyntaxError" in (broken / "log").read_text()
    finally:
        sessions.close()


def test_a_session_past_its_time_is_killed_and_the_next_one_runs(tmp_path):
    sessions = WarmExporter(tmp_path, warm=("pytest",))
    try:
        slow = _commit(tmp_path / "slow", 1, "import time\n\ndef test_slow():\n"
                                             "    time.sleep(60)\n")
        with pytest.raises(SessionTimeout):
            sessions.session(["-q", "-p", "no:cacheprovider"], slow, slow / "log", 1.5)
        fine = _commit(tmp_path / "fine", 3)
        assert sessions.session(["-q", "-p", "no:cacheprovider", "test_it.py"], fine,
                                fine / "log", 60) == 0
    finally:
        sessions.close()
    assert sessions.proc.returncode == 0
