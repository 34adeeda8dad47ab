"""The JSON line our runners (native, python) print last, parsed: what a process's ETDump cannot
hold (its own load timers, resident memory). A runner's output is read here, below the runners
that print it, so the analysis of a process never imports a runner."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields

from pytest_sme2.results.machine import ProbeReading


@dataclass(frozen=True)
class GenerationSummary:
    """The ``generation`` object of a runner's summary line (``--generate P,D``): the program's
    limits, how the loop ran it, the sampled token ids (those of every generation: the runner
    refuses a program whose generations differ) and the runner's own timers per generation,
    warm-up ones included, in ms."""

    prompt_tokens: int
    new_tokens: int
    warmup: int
    generations: int                # warm-up included
    prefill_executes: int           # per generation: 1 (dynamic length) or prompt_tokens
    decode_executes: int            # per generation: new_tokens
    dynamic_shape: bool
    depth: int = 0                  # tokens filled into the KV cache before the prompt, untimed
    depth_executes: int = 0         # per generation: the fill's executes, before the prompt's
    use_kv_cache: bool | None = None
    max_seq_len: int | None = None
    max_context_len: int | None = None
    vocab_size: int | None = None
    prompt: tuple[int, ...] = ()
    tokens: tuple[int, ...] = ()
    prefill_ms: tuple[float, ...] = ()
    first_sampling_ms: tuple[float, ...] = ()
    sampling_ms: tuple[float, ...] = ()      # all argmax of a generation
    decode_ms: tuple[float, ...] = ()
    generation_ms: tuple[float, ...] = ()
    # Sampled steps of the first generation whose logits held a NaN or an infinity (None: a
    # runner that does not check).
    nonfinite_steps: int | None = None
    # A runner's own figures beside ours (ExecuTorch's TextLLMRunner: its stats.h, whole ms):
    # GenerationResult.runner_report.
    runner_report: dict | None = None

    @property
    def executes_per_generation(self) -> int:
        return self.depth_executes + self.prefill_executes + self.decode_executes

    def to_json(self) -> dict:
        """The summary as a runner prints it (:meth:`from_json` reads it back)."""
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v
                for f in fields(self)}

    @classmethod
    def from_json(cls, d: dict) -> GenerationSummary:
        def limit(key: str) -> int | None:
            n = _count(d.get(key))
            return n if n is not None and n >= 0 else None

        def floats(key: str) -> tuple[float, ...]:
            return tuple(float(v) for v in d.get(key) or ())

        kv = d.get("use_kv_cache")
        return cls(prompt_tokens=int(d["prompt_tokens"]), new_tokens=int(d["new_tokens"]),
                   warmup=int(d.get("warmup", 0)), generations=int(d["generations"]),
                   prefill_executes=int(d["prefill_executes"]),
                   decode_executes=int(d.get("decode_executes", d["new_tokens"])),
                   dynamic_shape=bool(d.get("dynamic_shape", True)),
                   depth=int(d.get("depth", 0)), depth_executes=int(d.get("depth_executes", 0)),
                   use_kv_cache=kv if isinstance(kv, bool) else None,
                   max_seq_len=limit("max_seq_len"), max_context_len=limit("max_context_len"),
                   vocab_size=limit("vocab_size"),
                   prompt=tuple(int(t) for t in d.get("prompt") or ()),
                   tokens=tuple(int(t) for t in d.get("tokens") or ()),
                   prefill_ms=floats("prefill_ms"), first_sampling_ms=floats("first_sampling_ms"),
                   sampling_ms=floats("sampling_ms"), decode_ms=floats("decode_ms"),
                   generation_ms=floats("generation_ms"),
                   nonfinite_steps=_count(d.get("nonfinite_steps")),
                   runner_report=d["runner_report"] if isinstance(d.get("runner_report"), dict)
                   else None)


@dataclass(frozen=True)
class TracedPass:
    """The operator-traced runs a runner made beside its untraced timed ones (the ETDump's):
    ``warmup`` + ``runs`` (generations, with --generate), ``executions`` Method::execute calls."""

    warmup: int
    runs: int
    executions: int


@dataclass(frozen=True)
class RunnerSummary:
    """The JSON line our runners (native, python) print last: what the ETDump cannot hold. A
    user's executor_runner prints none: every field is None then."""

    threads: int | None = None
    executions: int | None = None
    program_load_ms: float | None = None    # Module::load (+ method names), runner's timer
    method_load_ms: float | None = None     # Module::load_method, runner's timer
    rss_before_load_kb: int | None = None   # resident memory before the program loads
    rss_after_load_kb: int | None = None    # ... after the method loads
    peak_rss_kb: int | None = None          # VmHWM at the end of the process
    # What rss_after_load_kb includes beyond the load ("first run": the Python runtime loads
    # the method inside the first forward()), "" when nothing.
    rss_after_load_includes: str = ""
    peak_includes: str = ""     # what the process holds beyond the runtime, if much
    generation: GenerationSummary | None = None  # with --generate: the loop's own record
    # "untraced": the timed runs had no event tracer and ``execute_ms`` holds each execute by
    # the runner's clock (warm-up included, in order); "": every run was traced (the ETDump's).
    timing: str = ""
    execute_ms: tuple[float, ...] = ()
    # What ``execute_ms`` spans: "" for Method::execute itself (our native runner),
    # "ExecuTorchMethod.execute()" for the Python bindings' call around it.
    execute_span: str = ""
    traced: TracedPass | None = None
    clock_overhead_ns: float | None = None  # one timing's cost, measured in the process
    # Non-finite elements (NaN, inf) of the last outputs; None: not checked.
    nonfinite_outputs: int | None = None
    # The machine-state probe timed around the runs (RunRequest.probe); None: not probed.
    probe: ProbeReading | None = None

    @property
    def load_rss_kb(self) -> int | None:
        """Resident memory the program and method load added."""
        if self.rss_before_load_kb is None or self.rss_after_load_kb is None:
            return None
        return self.rss_after_load_kb - self.rss_before_load_kb


def _number(v: object) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _count(v: object) -> int | None:
    n = _number(v)
    return int(n) if n is not None else None


def _traced(d: object) -> TracedPass | None:
    if not isinstance(d, dict):
        return None
    warmup, runs, executions = (_count(d.get(k)) for k in ("warmup", "runs", "executions"))
    if runs is None or executions is None:
        return None
    return TracedPass(warmup or 0, runs, executions)


def _floats(v: object) -> tuple[float, ...]:
    return tuple(float(x) for x in v) if isinstance(v, list) and all(
        _number(x) is not None for x in v) else ()


def _probe(d: object) -> ProbeReading | None:
    if not isinstance(d, dict):
        return None
    before, after = _floats(d.get("before_us")), _floats(d.get("after_us"))
    return ProbeReading(list(before), list(after)) if before and after else None


def _generation(d: object) -> GenerationSummary | None:
    if not isinstance(d, dict):
        return None
    try:
        return GenerationSummary.from_json(d)
    except (KeyError, TypeError, ValueError):
        return None


def parse_summary(stdout: str) -> RunnerSummary:
    """The summary from a runner's stdout: its last line that is a JSON object, or an empty
    summary when there is none (a user's executor_runner)."""
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if not (line.startswith("{") and line.endswith("}")):
            continue
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if not isinstance(d, dict):
            continue
        return RunnerSummary(
            threads=_count(d.get("threads")), executions=_count(d.get("executions")),
            program_load_ms=_number(d.get("program_load_ms")),
            method_load_ms=_number(d.get("method_load_ms")),
            rss_before_load_kb=_count(d.get("rss_before_load_kb")),
            rss_after_load_kb=_count(d.get("rss_after_load_kb")),
            peak_rss_kb=_count(d.get("peak_rss_kb")),
            rss_after_load_includes=str(d.get("rss_after_load_includes") or ""),
            peak_includes=str(d.get("peak_includes") or ""),
            generation=_generation(d.get("generation")),
            timing=str(d.get("timing") or ""), execute_ms=_floats(d.get("execute_ms")),
            execute_span=str(d.get("execute_span") or ""), traced=_traced(d.get("traced")),
            clock_overhead_ns=_number(d.get("clock_overhead_ns")),
            nonfinite_outputs=_count(d.get("nonfinite_outputs")), probe=_probe(d.get("probe")))
    return RunnerSummary()
