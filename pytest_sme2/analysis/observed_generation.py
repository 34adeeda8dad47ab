"""A generation that ExecuTorch's own LLM runner (``llama_main``) ran, turned into what our
runners give: its ETDump cut to the timed generation's forwards and a
:class:`~pytest_sme2.analysis.runner_summary.GenerationSummary` made from its
``PyTorchObserver`` report (:mod:`pytest_sme2.analysis.llm_observer`). Then the one generation
analysis (:mod:`pytest_sme2.analysis.phases`) reads it like any other.

What its ETDump holds (``extension/llm/runner``, ExecuTorch 1.1+ built with the event tracer,
written once at exit): the loads of forward and of the constant methods it reads
(``get_max_seq_len``, ``use_kv_cache``, ... through the same traced ``Module``: one
``Execute`` block each, with no operator in it), a ``--warmup`` generation (its length is not
the timed one's: it decodes up to ``seq_len`` tokens and stops at EOS), then the timed
generation: the prefill (one execute where forward's length is dynamic, else one per prompt
token) and ``generated_tokens`` decode executes. So the timed generation is the **last**
``prefill + generated_tokens`` executes that ran an operator; everything before is left out.

Its prompt is text, so its prompt token count is its tokenizer's (the report's
``prompt_tokens``); its sampled ids are not printed, so a comparison cannot check tokens; its
TTFT is the report's (``first_token_ms - inference_start_ms``: tokenizer encode included, as
upstream measures it)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pytest_sme2.analysis.phases import keep_runs
from pytest_sme2.analysis.llm_observer import ObserverStats, parse_observer
from pytest_sme2.analysis.runner_summary import GenerationSummary, RunnerSummary
from pytest_sme2.errors import Sme2Error

METHOD_EXECUTE = "Method::execute"


class ObservedGenerationError(Sme2Error):
    pass


def observer_report(stdout: str, source: str) -> ObserverStats:
    """The runner's last ``PyTorchObserver`` report (one per timed generation)."""
    reports = parse_observer(stdout)
    if not reports:
        raise ObservedGenerationError(f"{source}: the runner printed neither our generation "
                                      "summary nor a PyTorchObserver report (is it ExecuTorch's "
                                      "llama_main?)")
    return reports[-1]


def forward_runs(events: pd.DataFrame) -> np.ndarray:
    """The ``Execute`` blocks that ran an operator (forward), in order: a constant method's
    execute (``get_max_seq_len``, ...) holds nothing but ``Method::execute``."""
    runs = events["run"].to_numpy()
    work = (runs >= 0) & (events["name"].astype(str).to_numpy() != METHOD_EXECUTE)
    return np.unique(runs[work])


def forwards_only(events: pd.DataFrame) -> pd.DataFrame:
    """The events with only forward's executes, numbered 0.. in order (the constant methods'
    left out), the load blocks (run -1) kept: the process as our runners' would read, for its
    first inference."""
    return keep_runs(events, forward_runs(events))


def timed_generation(events: pd.DataFrame, executes: int, source: str) -> pd.DataFrame:
    """The events of the last ``executes`` forwards, numbered 0.. in order; the load blocks
    (run -1) kept, every other execute (constant methods, the warm-up) left out."""
    forwards = forward_runs(events)
    if forwards.size < executes:
        raise ObservedGenerationError(
            f"{source}: {forwards.size} executes of forward in the ETDump, fewer than the "
            f"{executes} of the generation the runner reported (prefill + decode steps)")
    return keep_runs(events, forwards[forwards.size - executes:])


def observed_summary(report: ObserverStats, dynamic_shape: bool,
                     max_seq_len: int | None = None) -> RunnerSummary:
    """Our summary of the runner's one timed generation: prefill in one execute per chunk of
    ``max_seq_len`` tokens where forward's length is dynamic, else one per prompt token;
    decode ``generated_tokens`` executes. Its load time (the report's, which covers what the
    ETDump's method loads do) is not the program's here: the ETDump's load events are."""
    prompt = report.prompt_tokens
    if dynamic_shape:
        chunk = max_seq_len if max_seq_len and max_seq_len > 0 else prompt
        prefill_executes = max(1, -(-prompt // max(chunk, 1)))
    else:
        prefill_executes = prompt
    first = (report.ttft_ms - report.prefill_ms) if (
        report.ttft_ms is not None and report.prefill_ms is not None) else None
    generation = GenerationSummary(
        prompt_tokens=prompt, new_tokens=report.generated_tokens, warmup=0, generations=1,
        prefill_executes=prefill_executes, decode_executes=report.generated_tokens,
        dynamic_shape=dynamic_shape, max_seq_len=max_seq_len,
        prefill_ms=(report.prefill_ms,) if report.prefill_ms is not None else (),
        first_sampling_ms=(max(first, 0.0),) if first is not None else (),
        sampling_ms=(report.sampling_ms,) if report.sampling_ms is not None else (),
        decode_ms=(report.decode_ms,) if report.decode_ms is not None else (),
        generation_ms=((report.prefill_ms + report.decode_ms),)
        if report.prefill_ms is not None and report.decode_ms is not None else ())
    return RunnerSummary(generation=generation)


def report_line(report: ObserverStats) -> str:
    """The runner's own figures in words: ``prefill 266.7 tok/s, decode 39.2 tok/s, TTFT
    120 ms, load 1250 ms``."""
    def num(v: float | None, unit: str) -> str:
        return f"{v:,.1f} {unit}" if v is not None else f"? {unit}"

    return (f"prefill {num(report.prefill_tokens_per_s, 'tok/s')}, decode "
            f"{num(report.decode_tokens_per_s, 'tok/s')}, TTFT {num(report.ttft_ms, 'ms')}, "
            f"load {num(report.load_ms, 'ms')} ({report.prompt_tokens} prompt + "
            f"{report.generated_tokens} generated tokens)")
