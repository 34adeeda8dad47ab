import random
import struct

import pytest

from pytest_sme2.readers.etdump import EVENT_COLUMNS, ETDumpError, parse_etdump, read_etdump
from tests.fakes.etdumps import Ev, execute_run, make_etdump

OPS = [("Convolution (NHWC, F32) IGEMM #1", 5000), ("Transpose (ND, X32) #1", 2000)]


@pytest.fixture(scope="module")
def two_runs() -> bytes:
    return make_etdump([execute_run(10_000, OPS), execute_run(50_000, OPS)], extra_events=True)


def test_one_row_per_profile_event_with_runs_numbered(two_runs):
    df = parse_etdump(two_runs)
    assert list(df.columns) == EVENT_COLUMNS
    assert df["block_name"].tolist()[:2] == ["Default", "Default"]
    assert df.loc[df.block_name == "Default", "run"].eq(-1).all()
    # 2 ops + DELEGATE_CALL + Method::execute per run; allocation events skipped
    assert df.groupby("run").size().to_dict() == {-1: 2, 0: 4, 1: 4}


def test_delegate_names_come_from_debug_string(two_runs):
    df = parse_etdump(two_runs)
    run0 = df[df.run == 0]
    assert run0["name"].tolist() == [n for n, _ in OPS] + ["DELEGATE_CALL", "Method::execute"]
    assert run0["delegated"].tolist() == [True, True, False, False]


def test_durations_are_ns_to_ms(two_runs):
    df = parse_etdump(two_runs)
    conv = df[(df.run == 1) & df.name.str.startswith("Convolution")].iloc[0]
    assert conv.start == 50_100 and conv.end == 55_100
    assert conv.duration_ms == pytest.approx(0.005)
    execute = df[(df.run == 1) & (df.name == "Method::execute")].iloc[0]
    assert execute.duration_ms == pytest.approx((7000 + 200) / 1e6)


def test_size_prefix_is_optional():
    runs = [execute_run(0, OPS)]
    a = parse_etdump(make_etdump(runs, size_prefixed=True))
    b = parse_etdump(make_etdump(runs, size_prefixed=False))
    assert a.equals(b)


def test_unnamed_event_without_debug_id_gets_a_placeholder():
    df = parse_etdump(make_etdump([[Ev(None, 0, 10), Ev("Method::execute", 0, 20)]],
                                  init_block=False))
    assert df["name"].tolist() == ["<unnamed>", "Method::execute"]


def test_read_missing_file_names_it(tmp_path):
    with pytest.raises(ETDumpError, match=r"nope\.etdump: no such ETDump file"):
        read_etdump(tmp_path / "nope.etdump")


def test_read_directory(tmp_path):
    with pytest.raises(ETDumpError, match="is a directory"):
        read_etdump(tmp_path)


def test_empty_file(tmp_path):
    p = tmp_path / "empty.etdump"
    p.write_bytes(b"")
    with pytest.raises(ETDumpError, match=r"empty\.etdump: empty file"):
        read_etdump(p)


def test_other_file_type_is_not_an_etdump(tmp_path):
    p = tmp_path / "model.pte"
    p.write_bytes(struct.pack("<I", 12) + b"ET12" + b"\0" * 64)  # a .pte-like header
    with pytest.raises(ETDumpError, match=r"model\.pte: not an ETDump"):
        read_etdump(p)


@pytest.mark.parametrize("cut", [4, 9, 16, 40, 0.5, 0.9, -1])
def test_truncated_file_is_a_clean_error(two_runs, cut):
    n = int(len(two_runs) * cut) if isinstance(cut, float) else \
        (cut if cut > 0 else len(two_runs) - 1)
    with pytest.raises(ETDumpError, match=r"x\.etdump: "):
        parse_etdump(two_runs[:n], source="x.etdump")


def test_random_bytes_never_crash_with_anything_but_etdumperror(two_runs):
    rng = random.Random(1234)
    for _ in range(300):
        data = bytearray(two_runs)
        for _ in range(rng.randint(1, 12)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        try:
            parse_etdump(bytes(data), source="m.etdump")
        except ETDumpError as e:
            assert str(e).startswith("m.etdump: ")
