"""What a test touches: the fixtures. Each is thin — the benchmark itself (measure, confirm,
judge, record) is :mod:`pytest_sme2.measure.benchmark`; a fixture turns its outcome into pytest's
terms: results onto the test report, a failure, a skip, JUnit properties.

pytest finds them because :mod:`pytest_sme2.plugin` (the ``pytest11`` entry point) imports
them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, NoReturn

import pytest

from pytest_sme2.plugin.collector import (COMPARISON_PROPERTY, NOT_APPLICABLE, RESULT_PROPERTY,
                                          block_done, is_xdist_worker, live_progress,
                                          write_live)
from pytest_sme2.errors import Sme2Error
from pytest_sme2.gate.junit import junit_properties
from pytest_sme2.programs.export import ExportedModel, export_model
from pytest_sme2.programs.llm.tokenizer import check_tokenizer_path
from pytest_sme2.measure.matrix import Case
from pytest_sme2.measure.session import BenchSession
from pytest_sme2.measure.settings import BenchSettings
from pytest_sme2.results.generation import GenerationResult
from pytest_sme2.stats import DEFAULT_MARGIN
from pytest_sme2.plugin.scheduling import overlap_problem

if TYPE_CHECKING:  # the measuring stack (numpy, pandas) is imported when a benchmark runs
    from pytest_sme2.measure.benchmark import Benchmarked, BenchmarkLoop
    from pytest_sme2.measure.comparison import Comparison
    from pytest_sme2.results import BlockResult
    from pytest_sme2.results.device import DeviceFacts

SESSION_KEY = pytest.StashKey[BenchSession]()


def session_devices(config: pytest.Config) -> tuple[str, ...]:
    devices = config.stash[SESSION_KEY].devices
    assert devices
    return devices


def item_device(item: pytest.Item) -> str | None:
    """The device a collected test runs on; None when it uses none."""
    if "sme2_device_spec" not in getattr(item, "fixturenames", ()):
        return None
    params = getattr(item, "callspec", None)
    params = params.params if params else {}
    case = params.get("sme2_case") or params.get("sme2_llm_case")
    if isinstance(case, Case) and case.device:
        return case.device
    return params.get("sme2_device_spec") or session_devices(item.config)[0]


def fail(e: Sme2Error, config: pytest.Config | None = None):
    """Fail the test with the error's one line; the traceback only when asked for with an
    explicit --tb (long, short, native)."""
    if config is not None and config.getoption("tbstyle", "auto") in ("long", "short", "native"):
        raise pytest.fail.Exception(str(e), pytrace=True) from e
    # "from None": called while handling ``e``, and pytest prints a chained exception's message
    # again under "During handling of the above exception..." even with pytrace=False.
    raise pytest.fail.Exception(str(e), pytrace=False) from None


@pytest.fixture(scope="session")
def sme2_session(pytestconfig: pytest.Config) -> BenchSession:
    return pytestconfig.stash[SESSION_KEY]


@pytest.fixture(scope="session")
def sme2_settings(sme2_session: BenchSession) -> BenchSettings:
    return sme2_session.settings


@pytest.fixture
def sme2_device_spec(request: pytest.FixtureRequest, sme2_session: BenchSession) -> str:
    """The ``--device`` spec this test runs on: its ``sme2_case``'s device, or (a test without
    the matrix) its device parameter when the session has several, else the only device."""
    device = item_device(request.node)
    return device if device is not None else session_devices(request.config)[0]


@pytest.fixture
def sme2_device(pytestconfig: pytest.Config, sme2_session: BenchSession, sme2_device_spec: str):
    """The device this test runs on (``--device``; one per test when there are several); a
    device that cannot be opened, or is gone, fails each test that needs it with one line
    saying what to do."""
    if is_xdist_worker(pytestconfig):
        problem = overlap_problem(pytestconfig)
        if problem:
            pytest.fail(problem, pytrace=False)
    try:
        return sme2_session.device(sme2_device_spec)
    except Sme2Error as e:
        fail(e, pytestconfig)


@pytest.fixture(scope="session")
def sme2_runners(sme2_session: BenchSession) -> dict[str, dict]:
    """The configured runners by name: kind and labels (made on first use, not here)."""
    return {name: {"kind": s.kind, "labels": dict(s.labels),
                   "path": str(s.path) if s.path else None}
            for name, s in sme2_session.specs.items()}


def not_applicable(reason: str) -> NoReturn:
    """Skip a test that cannot apply to this device, saying why (the summary repeats it)."""
    pytest.skip(NOT_APPLICABLE + reason)


def _pair_runner(session: BenchSession, sme2: bool, state: str, config: pytest.Config,
                 device: str) -> str:
    """The SME2 pair's runner (``sme2``), else the SME pair's, in ``state``: a skip saying why
    where the device has none."""
    find, why = (session.sme2_runner, no_sme2_runner_reason) if sme2 else \
        (session.sme_runner, no_sme_runner_reason)
    try:
        name = find(state, device)
    except Sme2Error as e:   # the device could not be opened to ask it about SME or SME2
        fail(e, config)
    if name is None:
        pytest.skip(why(state, _facts(session, device)))
    return name


def _facts(session: BenchSession, device: str) -> DeviceFacts | None:
    """The device's facts, or None when it cannot be asked (the skip then says less)."""
    try:
        return session.device(device).facts()
    except Sme2Error:
        return None


def _sme1_only(facts: DeviceFacts) -> str:
    """Why an SME2 test cannot apply on a device with SME but no SME2, and what runs there."""
    return (f"device {facts.label} has SME but no SME2 ({facts.sme_class} in its hwcaps): no "
            "SME2 kernel can run there; its SME pair (sme_on vs sme_off, "
            "benchmarks/test_sme.py) measures the SME it has")


def no_sme2_runner_reason(state: str, facts: DeviceFacts | None) -> str:
    """Why an SME2 comparison skips when no SME2-``state`` runner is configured: first that the
    device has no SME2 at all (no runner pair would help there), else what to pass."""
    if facts is not None and facts.sme2 is False:
        if facts.sme:
            return NOT_APPLICABLE + _sme1_only(facts)
        return (f"{NOT_APPLICABLE}this device has no SME2 ({facts.abi or facts.kind}: no SME2 "
                "hwcap); --device qemu emulates one")
    return (f"no SME2-{state} runner configured: pass --runner "
            f"sme2_{state}=/path/to/executor_runner,sme2={state} "
            "(build recipe: docs/native-runner.md), or run on --device qemu, where "
            "the native runner with SME2 hidden is the SME2-off side")


def no_sme_runner_reason(state: str, facts: DeviceFacts | None) -> str:
    """Why an SME comparison (SME on vs SME hidden, on a device with SME but no SME2) skips:
    the device's class, else what to pass."""
    if facts is not None and facts.sme2:
        return (f"{NOT_APPLICABLE}device {facts.label} has SME2: its SME2 pair (sme2_on, "
                "sme2_off, sme_only) measures it; --device qemu:sme1 emulates SME without SME2")
    if facts is not None and facts.sme is False:
        return (f"{NOT_APPLICABLE}device {facts.label} has no SME "
                f"({facts.abi or facts.kind}: no SME hwcap); --device qemu:sme1 emulates SME "
                "without SME2")
    return (f"no SME-{state} runner configured: pass --runner "
            f"sme_{state}=/path/to/executor_runner,sme={state}, or run on a device with SME but "
            "no SME2 (--device qemu:sme1), where the native runner with SME hidden is the "
            "SME-off side")


@pytest.fixture
def sme_on(pytestconfig: pytest.Config, sme2_session: BenchSession,
           sme2_device_spec: str) -> str:
    """Name of the runner labelled sme=on (or named sme_on); on a device with SME but no SME2
    that can hide SME from a process (``--device qemu:sme1``, such a phone) the native runner
    as built; skips, saying why, when there is none."""
    return _pair_runner(sme2_session, False, "on", pytestconfig, sme2_device_spec)


@pytest.fixture
def sme_off(pytestconfig: pytest.Config, sme2_session: BenchSession,
            sme2_device_spec: str) -> str:
    """Name of the runner labelled sme=off (or named sme_off); on a device with SME but no SME2
    the same native binary with SME hidden too; skips, saying why, when there is none."""
    return _pair_runner(sme2_session, False, "off", pytestconfig, sme2_device_spec)


@pytest.fixture
def sme2_on(pytestconfig: pytest.Config, sme2_session: BenchSession,
            sme2_device_spec: str) -> str:
    """Name of the runner labelled sme2=on (or named sme2_on); on an SME2 device that can hide
    SME2 from a process (QEMU) the native runner as built; skips when there is none."""
    return _pair_runner(sme2_session, True, "on", pytestconfig, sme2_device_spec)


@pytest.fixture
def sme2_off(pytestconfig: pytest.Config, sme2_session: BenchSession,
             sme2_device_spec: str) -> str:
    """Name of the runner labelled sme2=off (or named sme2_off); on an SME2 device that can hide
    SME2 from a process (QEMU) the same native binary with SME and SME2 masked; skips when there
    is none."""
    return _pair_runner(sme2_session, True, "off", pytestconfig, sme2_device_spec)


@pytest.fixture
def sme2_emulated(sme2_device) -> bool:
    """True on an emulated CPU (QEMU): its timings say nothing about speed, so tests assert
    kernels and outputs there, not speed-ups."""
    return sme2_device.facts().emulated


@pytest.fixture
def sme2_capable_device(sme2_device):
    """The device, skipping when its hwcaps say it has no SME2 (unknown capability runs)."""
    facts = sme2_device.facts()
    if facts.sme2 is False and facts.sme:
        not_applicable(_sme1_only(facts))
    if facts.sme2 is False:
        not_applicable(f"device {facts.serial} ({facts.cpu}, {facts.abi}) has no SME2 in its "
                       "hwcaps: an SME2-on runner cannot use SME2 kernels there")
    return sme2_device


@pytest.fixture(scope="session")
def sme2_min_speedup(sme2_session: BenchSession) -> Callable[[str], float]:
    """``sme2_min_speedup(dtype)``: the configured lower bound for an SME2 speed-up."""
    return lambda dtype: sme2_session.config.min_speedup.get(dtype, 1.0)


def _case_params(request: pytest.FixtureRequest) -> tuple[str, str]:
    params = getattr(request.node, "callspec", None)
    params = params.params if params else {}
    case = params.get("sme2_case")
    if isinstance(case, Case):
        return case.model, case.dtype
    if "model" in params:
        return params["model"], params.get("dtype", "fp32")
    pytest.fail(f"{request.node.nodeid}: sme2_model needs the test parametrized with sme2_case, "
                "or with 'model' (and optionally 'dtype')", pytrace=False)


@pytest.fixture
def sme2_model(request: pytest.FixtureRequest, sme2_session: BenchSession) -> ExportedModel:
    """The exported model (.pte, .etrecord, inputs, metadata) of this test's parametrization."""
    model, dtype = _case_params(request)
    s = sme2_session.settings
    try:
        return export_model(model, dtype, s.cache_dir, s.reexport,
                            progress=live_progress(request.config))
    except Sme2Error as e:
        fail(e, request.config)


class _OnTheTestReport:
    """A :class:`~pytest_sme2.measure.benchmark.Recorder` for a test: results ride on its report,
    so pytest-xdist carries them to the controller, whose collector adds them to the
    session."""

    def __init__(self, request: pytest.FixtureRequest):
        self.properties = request.node.user_properties

    def block(self, result: BlockResult) -> None:
        self.properties.append((RESULT_PROPERTY, result.to_json()))

    def comparison(self, comparison: Comparison) -> None:
        self.properties.append((COMPARISON_PROPERTY, comparison.to_json()))


def _label(request: pytest.FixtureRequest) -> str:
    """The test's node id as results name it: without the ``@group`` suffix xdist's loadgroup
    adds on workers, so a benchmark is named alike with and without -n."""
    nodeid = request.node.nodeid
    mark = request.node.get_closest_marker("xdist_group")
    if mark and mark.args and nodeid.endswith(f"@{mark.args[0]}"):
        return nodeid[:-len(mark.args[0]) - 1]
    return nodeid


def _loop(request: pytest.FixtureRequest, session: BenchSession, device: str) -> BenchmarkLoop:
    """The benchmark loop of this test: where, under which name, and where to report."""
    from pytest_sme2.measure.benchmark import BenchmarkLoop  # pandas: when a benchmark runs

    config = request.config
    return BenchmarkLoop(session, device=device, label=_label(request),
                         progress=live_progress(config),
                         block_done=lambda done, total: block_done(config, done, total),
                         recorder=_OnTheTestReport(request))


@pytest.fixture
def sme2_bench(request: pytest.FixtureRequest, sme2_session: BenchSession,
               sme2_device, sme2_device_spec: str) -> Callable[..., BlockResult]:
    """Run one benchmark setting and return its :class:`BlockResult`, judged against its
    baseline (a suspected regression measured again first)::

        def test_latency(sme2_bench):
            result = sme2_bench("toy_cnn", dtype="fp32", threads=1)
            assert result.e2e.median_ms < 5
    """
    sme2_session.prepare()   # the measuring stack, imported once the way the session wants it

    def bench(model: str, dtype: str = "fp32", threads: int = 1,
              runner: str | None = None) -> BlockResult:
        loop = _loop(request, sme2_session, sme2_device_spec)
        done = loop.benchmark(Case(model, dtype, threads), runner)
        _conclude(request, done)
        return done.result

    return bench


@pytest.fixture
def sme2_generate(request: pytest.FixtureRequest, sme2_session: BenchSession,
                  sme2_device, sme2_device_spec: str) -> Callable[..., GenerationResult]:
    """Measure an LLM as a generation — ``prompt_tokens`` prefilled, then ``new_tokens``
    greedy decode steps, per run — and return its :class:`GenerationResult` (prefill and
    decode: tokens/s, per-token statistics, categories, kernel evidence; ``ttft_ms``;
    ``tokens``; ``startup``, ``device``, ``runner``), judged against its baseline per phase::

        def test_llm(sme2_generate):
            gen = sme2_generate("tiny_llama", scheme="8da8w", threads=1)
            assert gen.decode.tokens_per_s > 100

    ``scheme`` is the LLM's quantization, a name of the scheme table
    (``pytest_sme2.programs.llm.schemes.SCHEMES``, listed in docs/reference/llm-schemes.md; a
    ``.pte`` is taken as exported). None for a token count: the session's
    ``--sme2-prompt-tokens`` / ``--sme2-new-tokens``. ``depth``: tokens filled into the KV
    cache, untimed, before the timed prompt (llama-bench's ``pp64 @ d512``; the generation
    matrix's ``sme2_llm_case.depth``). ``tokenizer``: a tokenizer file for a runner that takes
    text (``runner="text_llm_runner"``, ExecuTorch's own; default ``--sme2-tokenizer``, else
    one generated for the program)."""
    sme2_session.prepare()
    settings = sme2_session.settings

    def generate(model: str, scheme: str = "8da8w", threads: int = 1,
                 runner: str | None = None, tokenizer: str | Path | None = None,
                 prompt_tokens: int | None = None, new_tokens: int | None = None,
                 depth: int = 0) -> GenerationResult:
        try:
            given = check_tokenizer_path(tokenizer, "sme2_generate(tokenizer=...)") \
                if tokenizer is not None else None
            asked = settings.generation(prompt_tokens, new_tokens, depth, given)
        except Sme2Error as e:
            fail(e, request.config)
        loop = replace(_loop(request, sme2_session, sme2_device_spec), generation=asked)
        done = loop.benchmark(Case(model, scheme, threads), runner)
        _conclude(request, done)
        return done.result.generation

    return generate


@pytest.fixture
def sme2_compare(request: pytest.FixtureRequest, sme2_session: BenchSession,
                 sme2_device, sme2_device_spec: str) -> Callable[..., Comparison]:
    """Compare two runners on the same device in interleaved blocks::

        def test_sme2(sme2_compare, sme2_off, sme2_on):
            cmp = sme2_compare(sme2_off, sme2_on, "mobilenet_v3_small", dtype="fp16")
            assert cmp.speedup.low >= 1.5

    ``speedup`` is base time / candidate time with a 95% CI over paired blocks. Each side is
    judged against its baseline end to end, on all its blocks."""
    sme2_session.prepare()

    def compare(base: str, candidate: str, model: str, dtype: str = "fp32", threads: int = 1,
                blocks: int | None = None, margin: float = DEFAULT_MARGIN,
                prompt_tokens: int | None = None, new_tokens: int | None = None,
                depth: int = 0) -> Comparison:
        asked = None
        if prompt_tokens is not None or new_tokens is not None or depth:   # an LLM, these
            try:
                asked = sme2_session.settings.generation(prompt_tokens, new_tokens, depth)
            except Sme2Error as e:
                fail(e, request.config)
        loop = replace(_loop(request, sme2_session, sme2_device_spec), generation=asked)
        done = loop.compare(base, candidate, Case(model, dtype, threads), blocks, margin)
        _conclude(request, done)
        return done.comparison

    return compare


def _conclude(request: pytest.FixtureRequest, done: Benchmarked) -> None:
    """The outcome in pytest's terms: a failed run fails the test with its one line; else
    the gate's JUnit properties, and a failure when the policy is enforced
    (--fail-on-regression) and the report shows a clear regression, or a baseline exists but
    cannot be compared (never a silent pass)."""
    if done.error is not None:
        fail(done.error, request.config)
    report = done.report
    for judgement in report.judgements:
        request.node.user_properties.extend(junit_properties(judgement))
    if request.config.stash[SESSION_KEY].config.strict_outputs:
        broken = [b for b in done.blocks if b.context.output_problem]
        if broken:
            pytest.fail(f"{broken[0].model} {broken[0].dtype} ({broken[0].runner_name}): "
                        f"{broken[0].context.output_problem} (--sme2-strict-outputs)",
                        pytrace=False)
    failure = report.failure(done.policy)
    if failure:
        pytest.fail(failure, pytrace=False)
    if not done.policy.enforced:  # one line per baseline file: its categories share the reason
        for reason in dict.fromkeys(j.reason for j in report.judgements if j.foreign):
            write_live(request.config, f"sme2: {reason}")
