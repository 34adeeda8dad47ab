"""pytest-sme2 compare: two synthetic ETDumps -> speed-up, deltas, KleidiAI changes."""

import json
import subprocess
import sys

import pytest

from pytest_sme2.report.etdump_diff import (compare_lines, render_markdown,
                                            with_recommendations)
from pytest_sme2.analysis.diff import (ADDED, CHANGED, COMPARE_SCHEMA, REMOVED, REPACKED,
                                       compare_analyses)
from pytest_sme2.analysis.summary import analyze_file
from pytest_sme2.cli import main
from tests.fakes.etdumps import make_etdump, program_run


def _runs(conv_ns: int, conv: str, *, extra: bool = False, drop_fc: bool = False, n: int = 6):
    out = []
    for r in range(n):
        wobble = 1 + 0.01 * (r % 3)
        ops = [(f"{conv} #1", int(conv_ns * wobble)), ("Transpose (ND, X32) #3", 300_000)]
        if not drop_fc:
            ops.insert(1, ("Fully Connected (NC, F32) #2", int(conv_ns / 2 * wobble)))
        if extra:
            ops.append(("Add (ND) #4", 50_000))
        calls = [("delegate", 0, ops), ("portable", 1, [("aten::_to_dim_order_copy", 200_000)])]
        out.append(program_run(r * 50_000_000, calls, framework_ns=20_000))
    return out


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("diff")
    off, on = d / "off.etdump", d / "on.etdump"
    off.write_bytes(make_etdump(_runs(4_000_000, "Convolution (NHWC, F32)", drop_fc=False)))
    on.write_bytes(make_etdump(_runs(1_000_000, "Convolution (NHWC, PF32)", extra=True,
                                     drop_fc=True)))
    return off, on


def test_compare_analyses(pair):
    d = compare_analyses(analyze_file(pair[0], warmup=1), analyze_file(pair[1], warmup=1),
                         base_name="SME2-Off", candidate_name="SME2-On")
    assert d.base_runs == d.candidate_runs == 5
    # base: 4 ms conv + 2 ms FC + ...; candidate: 1 ms conv, no FC, + add
    assert d.speedup.point == pytest.approx(d.base_median_ms / d.candidate_median_ms)
    assert d.speedup.low <= d.speedup.point <= d.speedup.high
    assert d.speedup.point > 2 and d.verdict == "faster"
    assert "cannot separate process-to-process noise" in d.note
    by_status = {o.status: o for o in d.operators}
    rep = by_status[REPACKED]
    assert (rep.base_name, rep.candidate_name) == ("Convolution (NHWC, F32) #1",
                                                   "Convolution (NHWC, PF32) #1")
    assert rep.delta_ms == pytest.approx(rep.candidate_ms - rep.base_ms)
    assert rep.delta_pct == pytest.approx(-75, abs=1)
    assert d.kleidiai_changes == [(rep.base_name, rep.candidate_name)]
    assert d.kleidiai_candidate == ["Convolution (NHWC, PF32)"] and d.kleidiai_base == []
    assert [o.op for o in d.added] == ["Add (ND)"]
    assert [o.op for o in d.removed] == ["Fully Connected (NC, F32)"]
    assert d.removed[0].candidate_ms == 0 and d.removed[0].delta_pct == -100
    assert {o.op for o in d.operators if o.status == CHANGED} == {
        "Transpose (ND, X32)", "native_call_aten::_to_dim_order_copy.out"}
    cats = {c.category: c for c in d.categories}
    assert cats["Convolution"].delta_ms == pytest.approx(-3.03, abs=0.05)
    assert cats["Convolution"].speedup.point == pytest.approx(4, rel=0.01)
    assert sum(c.delta_ms for c in d.categories) == pytest.approx(
        analyze_file(pair[1], warmup=1).e2e.mean_ms - analyze_file(pair[0], warmup=1).e2e.mean_ms)
    assert any(o.op == "Convolution (NHWC, PF32)" for o in d.bottlenecks)
    d = with_recommendations(d, analyze_file(pair[0], warmup=1), analyze_file(pair[1], warmup=1))
    rules = {r["rule"] for r in d.recommendations}
    assert "data-movement" in rules and "portable-op" in rules
    assert all("ETDumps  t0" not in r["text"] for r in d.recommendations)


def test_same_trace_no_difference(pair):
    a = analyze_file(pair[0])
    d = compare_analyses(a, a)
    assert d.speedup.point == pytest.approx(1.0)
    assert d.verdict == "no significant difference"
    assert all(o.status == CHANGED and o.delta_ms == 0 for o in d.operators)
    assert not d.kleidiai_changes


def test_renderers(pair):
    d = compare_analyses(analyze_file(pair[0]), analyze_file(pair[1]), base_name="A",
                         candidate_name="B")
    lines = compare_lines(d)
    assert len(lines) < 20 and "speed-up B vs A" in lines[2] and "note:" in lines[3]
    assert any(line.startswith("KleidiAI: Convolution (NHWC, F32) #1 ->") for line in lines)
    md = render_markdown(d)
    for heading in ("## Speed-up", "## Operator Category Breakdown", "## Operators",
                    "## KleidiAI packed paths", "## Bottleneck Identification",
                    "## Recommendations"):
        assert heading in md
    assert "| removed |" in md and "| added |" in md and "| repacked |" in md


def test_cli_compare(pair, tmp_path, capsys):
    j, m = tmp_path / "c.json", tmp_path / "c.md"
    assert main(["compare", str(pair[0]), str(pair[1]), "--name1", "SME2-Off", "--name2",
                 "SME2-On", "--warmup", "1", "--json", str(j), "--md", str(m)]) == 0
    out = capsys.readouterr().out
    assert "speed-up SME2-On vs SME2-Off:" in out and f"wrote {j}" in out
    doc = json.loads(j.read_text())
    assert doc["schema"] == COMPARE_SCHEMA
    assert doc["base"]["name"] == "SME2-Off" and doc["candidate"]["timed_runs"] == 5
    assert set(doc["speedup"]) == {"point", "low", "high", "confidence"}
    assert {o["status"] for o in doc["operators"]} == {CHANGED, ADDED, REMOVED, REPACKED}
    assert doc["kleidiai_changes"][0]["candidate"] == "Convolution (NHWC, PF32) #1"
    assert m.read_text().startswith("# ETDump comparison: SME2-Off → SME2-On")


@pytest.mark.parametrize("case,msg", [("missing", "no such ETDump file"),
                                      ("garbage", "not an ETDump"),
                                      ("warmup", "leaves no timed runs")])
def test_cli_compare_bad_input_one_line_exit_2(pair, tmp_path, case, msg):
    cand = str(pair[1])
    args = []
    if case == "missing":
        cand = str(tmp_path / "nope.etdump")
    elif case == "garbage":
        p = tmp_path / "junk.etdump"
        p.write_bytes(b"\x01\x02not a flatbuffer" * 40)
        cand = str(p)
    else:
        args = ["--warmup", "6"]
    proc = subprocess.run([sys.executable, "-m", "pytest_sme2.cli", "compare", str(pair[0]),
                           cand, *args], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and msg in proc.stderr
    assert "Traceback" not in proc.stderr
