"""Matrix, runners, comparisons and SME2 skips, as users meet them in an inner session."""

import json
import shutil
from pathlib import Path

import pytest

from pytest_sme2.devices.facts import host_facts

pytestmark = pytest.mark.usefixtures("inner_session_env")

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

MATRIX = """
def test_lat(sme2_bench, sme2_case):
    sme2_bench(sme2_case.model, dtype=sme2_case.dtype, threads=sme2_case.threads,
               runner="native")

def test_model(sme2_model, sme2_case):
    assert sme2_model.pte.is_file() and sme2_model.dtype == sme2_case.dtype
"""

COMPARE = """
def test_cmp(sme2_compare):
    cmp = sme2_compare("a", "b", "toy_cnn", dtype="fp32", blocks=3)
    assert cmp.outputs.equal
    assert cmp.speedup.low >= 1.5
"""

SME2 = """
def test_needs_sme2(sme2_off, sme2_on, sme2_capable_device):
    pass
"""


def _doc(pytester, folder="sme2-report"):
    return json.loads((pytester.path / folder / "results.json").read_text())


def test_matrix_ids_filter_and_fixture(pytester, export_cache, toy_export, run_pytest):
    pytester.makepyfile(test_m=MATRIX)
    res = run_pytest("-rs", f"--sme2-cache-dir={export_cache}", "--sme2-models=toy_cnn",
               "--sme2-dtypes=fp32", "--sme2-threads=1,2", "--runs=3", "--warmup=1", "-v",
               "-k", "t2 or test_model")
    res.assert_outcomes(passed=3)
    res.stdout.fnmatch_lines(["*test_lat?toy_cnn-fp32-t2? PASSED*",
                              "*test_model?toy_cnn-fp32-t1? PASSED*"])
    doc = _doc(pytester)
    assert [(b["threads"], b["runner"]) for b in doc["benchmarks"]] == [(2, "native")]
    assert doc["session"]["runners"]["native"]["kind"] == "native"


@pytest.mark.parametrize("args,msg", [
    (["--sme2-models=resnet"], "unknown model 'resnet'; registered models: "),
    (["--sme2-dtypes=bf16"], "unknown dtype 'bf16'"),
    (["--sme2-threads=0"], "give 1 or more"),
    (["--runner=x=pyton"], "'pyton' is neither a built-in runner"),
    (["--sme2-blocks=1"], "--sme2-blocks must be 2 or more"),
    (["--sme2-min-speedup=fp32"], "is not DTYPE=NUMBER"),
])
def test_bad_configuration_is_one_usage_error(pytester, args, msg, run_pytest):
    pytester.makepyfile(test_m=MATRIX)
    res = run_pytest("-rs", *args)
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert msg in res.stderr.str()
    assert "Traceback" not in res.stderr.str()


def test_comparison_records_blocks_and_shows_numbers_on_failure(pytester, export_cache,
                                                                 toy_export, run_pytest):
    pytester.makepyfile(test_c=COMPARE)
    # --sme2-max-pairs 3: the 3 blocks asked, whatever the verdict (a loaded machine cannot
    # tell; a quiet one says no change); doubling is tested with a stand-in session.
    res = run_pytest("-rs", f"--sme2-cache-dir={export_cache}", "--runs=20", "--warmup=2",
                     "--runner=a=native", "--runner=b=native", "--sme2-max-pairs=3")
    res.assert_outcomes(failed=1)
    out = res.stdout.str()
    verdict = "cannot tell" if "each: cannot tell" in out else "no change"
    # Same binary both sides: the assertion fails, and its message carries the numbers.
    res.stdout.fnmatch_lines(["E       assert 0.* >= 1.5",
                              "E        +  where 0.* = Interval(point=*, low=*, high=*).low",
                              "E        +    where Interval(*) = Comparison(b vs a on toy_cnn fp32 "
                              f"t1: speed-up *: {verdict}).speedup"])
    assert (f"over 3 blocks each: {verdict}, outputs equal" in out
            and "sme2: b vs a on toy_cnn fp32 t1: speed-up " in out)
    doc = _doc(pytester)
    assert len(doc["benchmarks"]) == 6 and [b["block"] for b in doc["benchmarks"]] == \
        [0, 0, 1, 1, 2, 2]
    # ABBA order: pair 0 runs a first, pair 1 runs b first.
    assert [b["runner"] for b in doc["benchmarks"]] == ["a", "b", "b", "a", "a", "b"]
    (c,) = doc["comparisons"]
    assert (c["base"], c["candidate"], c["verdict"]) == ("a", "b", verdict)
    assert c["outputs"]["equal"] and c["outputs"]["max_abs_diff"] == 0.0
    assert len(c["base_block_medians_ms"]) == 3


def test_sme2_tests_skip_saying_the_host_has_no_sme2(pytester, run_pytest):
    """On a host without SME2 (x86_64 here, and in CI) the skip says so first: no SME2-off
    runner would help there. On a host that may have SME2 it asks for the SME2-off runner
    instead (tests/unit/plugin/test_sme2_skip.py covers both without a host)."""
    facts = host_facts()
    pytester.makepyfile(test_s=SME2)
    res = run_pytest("-rs")
    res.assert_outcomes(skipped=1)
    if facts.sme2 is False:
        res.stdout.fnmatch_lines([f"*this device has no SME2 ({facts.abi}: no SME2 hwcap); "
                                  "--device qemu emulates one*"])
        res.stdout.no_fnmatch_line("*no SME2-off runner configured*")
    else:
        res.stdout.fnmatch_lines(["*no SME2-off runner configured*"])


def test_sme2_tests_skip_on_a_device_without_sme2(pytester, run_pytest):
    pytester.makepyfile(test_s=SME2)
    res = run_pytest("-rs", "--runner=sme2_on=native,sme2=on", "--runner=sme2_off=native,sme2=off")
    res.assert_outcomes(skipped=1)
    res.stdout.fnmatch_lines(["*has no SME2 in its hwcaps: an SME2-on runner cannot use SME2 "
                              "kernels there*"])


def test_unknown_runner_name_fails_listing_configured(pytester, export_cache, toy_export,
                                                      run_pytest):
    pytester.makepyfile(test_u="""
        def test_u(sme2_bench):
            sme2_bench("toy_cnn", runner="turbo")
    """)
    res = run_pytest("-rs", f"--sme2-cache-dir={export_cache}", "--runner=mine=native")
    res.assert_outcomes(failed=1)
    res.stdout.fnmatch_lines(["*unknown runner 'turbo'; configured: mine, native, python*"])


def test_help_lists_every_option_and_a_percent_sign_does_not_break_it(run_pytest):
    """argparse formats option help with %: "5% of" once crashed ``pytest --help``."""
    res = run_pytest("--help")
    assert res.ret == 0, res.stderr.str()
    out = " ".join(res.stdout.str().split())      # help wraps at any word
    assert "a category under 5% of the end-to-end time" in out
    for flag in ("--sme2-max-pairs", "--sme2-on-unresolved", "--sme2-precision-budget"):
        assert flag in out


def test_the_builtin_llm_benchmark_follows_sme2_threads_and_a_pinned_test_says_so(
        pytester, run_pytest):
    """`pytest benchmarks/test_llm.py --sme2-threads 1,2` collects the generation at both
    counts (the scaling table's input); the SME2 pair, pinned to 1 thread by its marker, is
    named in one line instead of dropping 2 threads without a word (issue 49, item 8)."""
    shutil.copy(BENCHMARKS / "test_llm.py", pytester.path / "test_llm.py")
    given = run_pytest("--co", "-q", "--sme2-threads=1,2")
    given.stdout.fnmatch_lines([
        "test_llm.py::test_generation[[]tiny_llama-8da8w-t1[]]",
        "test_llm.py::test_generation[[]tiny_llama-8da8w-t2[]]",
        "test_llm.py::test_generation_sme2[[]tiny_llama-8da8w-t1[]]",
        "sme2: --sme2-threads 1,2: 2 thread(s) not measured by test_generation_sme2 (their "
        "@pytest.mark.sme2(threads=[[]...[]]) keeps fewer)"])
    default = run_pytest("--co", "-q")
    assert "tiny_llama-8da8w-t2" not in default.stdout.str()
    assert "not measured by" not in default.stdout.str()
    default.stdout.fnmatch_lines(["test_llm.py::test_generation[[]tiny_llama-8da8w-t1[]]"])
