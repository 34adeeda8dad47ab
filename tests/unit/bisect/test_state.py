"""The state file: what a resumed bisect reads back, and when it starts afresh."""

import pytest

from pytest_sme2.bisect.measures import Compared
from pytest_sme2.bisect.programs import Exported, Program
from pytest_sme2.bisect.state import load, state_dir
from pytest_sme2.errors import Sme2Error


def test_a_saved_state_reads_back_for_the_same_arguments_only(tmp_path):
    folder = state_dir(tmp_path, "a" * 40, "b" * 40)
    assert folder.name == "aaaaaaaaaaaa..bbbbbbbbbbbb"
    state = load(folder, ["bench.py"])
    p = Program("bench.py::test", "f" * 64, "/x.pte", "native", "native", "host", 1)
    state.exported = {"a" * 40: Exported({p.benchmark: p}), "c" * 40: Exported({}, "broken")}
    state.compared = {"k": Compared("regression", 1.2, 1.1, 1.3, 6, 2.0, "why",
                                    {"base": {"GEMM": 1.0}, "candidate": {"GEMM": 1.2}})}
    state.save()
    again = load(folder, ["bench.py"])
    assert again.exported == state.exported and again.compared == state.compared
    assert load(folder, ["other.py"]).exported == {}
    state.remove()
    assert not folder.parent.exists()


def test_a_damaged_state_says_so_in_one_line(tmp_path):
    folder = state_dir(tmp_path, "a" * 40, "b" * 40)
    folder.mkdir(parents=True)
    (folder / "state.json").write_text("{")
    with pytest.raises(Sme2Error, match="not a bisect state this version reads"):
        load(folder, [])
