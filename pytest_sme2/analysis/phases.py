"""A generation's ETDump split into its phases, as a
:class:`~pytest_sme2.results.generation.GenerationResult`: every ``Method::execute`` tagged by
phase from the ETDump itself, warm-up generations dropped, then
per phase latency, tokens/s, per-token stats and operator categories (the one taxonomy of
:mod:`.categories`: leaves as :func:`.operators.annotate` defines them, summed per category the
way :func:`.operators.category_breakdown` sums them), and the time to first token.

The ETDump holds one Execute block per ``Method::execute``, in order. A runner's generation loop
(``--generate P,D``) runs ``generations`` generations of ``prefill_executes`` (1 where forward's
sequence length is dynamic, P where the prompt goes token by token) then ``decode_executes``
(D) executes each. So execute ``r`` belongs to generation ``r // E`` (E executes per
generation) and is prefill when ``r % E < prefill_executes``. A count that is not
``generations * E`` is an error, never a guess.

At context depth K each generation starts with ``depth_executes`` executes that fill the KV
cache (untimed, positions 0 .. K - 1): E counts them, and they belong to no timed phase (their
generation is -1 here), so neither the prompt's prefill nor a decode step is ever one of them.

Pure: events frame and the runner's summary in, records out; nothing here runs anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pytest_sme2.analysis.categories import OTHER, classify, is_framework_event, named_categories
from pytest_sme2.analysis.kernel_sources import NO_KERNELS, KernelSources
from pytest_sme2.analysis.latency import e2e_per_run, latency_stats
from pytest_sme2.analysis.runner_summary import GenerationSummary, parse_summary
from pytest_sme2.errors import Sme2Error
from pytest_sme2.results.generation import DECODE, PREFILL, GenerationResult, PhaseStats
from pytest_sme2.analysis.events import name_codes

if TYPE_CHECKING:
    import pandas as pd

    from pytest_sme2.analysis.categories import CategoryRule
    from pytest_sme2.results.records import KernelEvidence


class GenerationAnalysisError(Sme2Error):
    pass


def keep_runs(events: pd.DataFrame, keep: np.ndarray) -> pd.DataFrame:
    """The events of the Execute runs ``keep`` (ascending run ids), numbered 0.. in that
    order; the other blocks' events (run -1: loading) kept, every other run's left out."""
    run = events["run"].to_numpy()
    renumber = np.full(int(run.max()) + 1 if run.size else 0, -2)
    renumber[keep] = np.arange(keep.size)
    new_run = np.where(run >= 0, renumber[np.clip(run, 0, None)], run)
    kept = new_run != -2
    out = events.loc[kept].copy()
    out["run"] = new_run[kept].astype(events["run"].dtype)
    return out.reset_index(drop=True)


def phase_tags(executes: int, generations: int, prefill_executes: int, decode_executes: int,
               source: str = "ETDump", depth_executes: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(generation of each execute, True where it is a prefill execute), for ``executes``
    Execute blocks in order; a depth fill's execute has generation -1 (it is timed in no
    phase). Raises when the count does not match the loop's."""
    per = depth_executes + prefill_executes + decode_executes
    if per <= depth_executes or generations <= 0:
        raise GenerationAnalysisError(f"{source}: a generation of {prefill_executes} prefill "
                                      f"and {decode_executes} decode executes, {generations} "
                                      "times, runs nothing")
    if executes != generations * per:
        fill = f"{depth_executes} depth-fill + " if depth_executes else ""
        raise GenerationAnalysisError(
            f"{source}: {executes} Method::execute events, but {generations} generations of "
            f"{fill}{prefill_executes} prefill + {decode_executes} decode executes make "
            f"{generations * per}: the ETDump is not of this generation loop (truncated, or a "
            "runner that executes other methods in the same trace)")
    step = np.arange(executes)
    within = step % per - depth_executes
    return np.where(within >= 0, step // per, -1), (within >= 0) & (within < prefill_executes)


def _phase_stats(phase: str, tokens: int, executes: int, per_gen_ms: np.ndarray,
                 per_exec_ms: np.ndarray | None, categories: dict[str, float]) -> PhaseStats:
    stats = PhaseStats(phase=phase, tokens=tokens, executes=executes,
                       generations=int(per_gen_ms.size), categories_ms=categories)
    if executes == 0 or per_gen_ms.size == 0:
        return stats
    stats.samples_ms = [round(float(v), 6) for v in per_gen_ms]
    s = latency_stats(per_gen_ms)
    stats.median_ms, stats.p90_ms, stats.cv_pct = s.median_ms, s.p90_ms, s.cv_pct
    stats.tokens_per_s = 1e3 * tokens / s.median_ms if s.median_ms > 0 else None
    if per_exec_ms is not None and per_exec_ms.size:
        t = latency_stats(per_exec_ms)
        stats.token_median_ms, stats.token_p90_ms, stats.token_cv_pct = (
            t.median_ms, t.p90_ms, t.cv_pct)
    return stats


class _Leaves:
    """Operator (leaf) events by name code, categorised once per distinct name: the part of
    :func:`pytest_sme2.analysis.operators.annotate` the phases need, without copying the frame
    (the generation analysis must cost no more per event than today's)."""

    def __init__(self, events: pd.DataFrame, rules: Sequence[CategoryRule] | None) -> None:
        self.codes, self.uniques = name_codes(events["name"])
        self.categories = named_categories(rules)
        names = self.uniques.tolist()
        framework = np.array([isinstance(u, str) and is_framework_event(u) for u in names],
                             dtype=bool)
        where = {c: i for i, c in enumerate(self.categories)}
        other = len(self.categories)
        self.category_of = np.array(
            [where.get(classify(u, rules), other) if isinstance(u, str) else other
             for u in names], dtype=np.int64)
        self.run = events["run"].to_numpy()
        self.leaf = (self.run >= 0) & ~framework[self.codes] if len(names) else self.run >= 0
        self.duration = events["duration_ms"].to_numpy()

    def rows(self, run_mask: np.ndarray) -> np.ndarray:
        """Leaf rows whose run is selected by ``run_mask`` (indexed by run id)."""
        run = self.run
        inside = np.zeros(run.size, dtype=bool)
        ok = run >= 0
        inside[ok] = run_mask[run[ok]]
        return self.leaf & inside

    def categories_ms(self, rows: np.ndarray, generations: int,
                      phase_ms_per_generation: float) -> dict[str, float]:
        """Mean ms per generation by named category, Other the rest of the phase's time (as
        :func:`pytest_sme2.analysis.operators.category_breakdown` makes them add up); none
        when nothing traced an operator (a runner timed by its executes alone)."""
        if generations <= 0 or not self.leaf.any():
            return {}
        d = self.duration[rows]
        sums = np.bincount(self.category_of[self.codes[rows]],
                           weights=np.where(np.isnan(d), 0.0, d),
                           minlength=len(self.categories) + 1)
        out = {c: float(sums[i]) / generations for i, c in enumerate(self.categories)}
        out[OTHER] = phase_ms_per_generation - sum(out.values())
        return out

    def names(self, rows: np.ndarray) -> list[str]:
        return [u for u in self.uniques[np.unique(self.codes[rows])].tolist()
                if isinstance(u, str)]


def phase_evidence(operator_names: Sequence[str],
                   kernels: KernelSources = NO_KERNELS) -> KernelEvidence:
    """The SME2 verdict of one phase: the KleidiAI (packed) operators among the operators its
    executes ran (main ETDump), and the kernels a phase-only process executed (its QEMU trace,
    ``RunRequest.phase_only``) or was sampled running (a phone), if given."""
    from pytest_sme2.analysis import (  # pandas: only phase_evidence() needs it
        kernel_sample as samples, kernel_trace as traces, kernels as verdicts)

    kernel_trace, kernel_sample = kernels.trace, kernels.sample
    if kernel_trace is not None and not isinstance(kernel_trace, traces.KernelTrace):
        kernel_trace = traces.read_kernel_trace_csv(kernel_trace)
    if kernel_sample is not None and not isinstance(kernel_sample, samples.KernelSample):
        kernel_sample = samples.read_kernel_sample_csv(kernel_sample)
    return verdicts.sme2_verdict(kernels=None, kleidiai=verdicts.kleidiai_ops(operator_names),
                                 device_sme2=kernels.device_sme2, executed=kernel_trace,
                                 sampled=kernel_sample, device_sme=kernels.device_sme)


def _fill_ms(ms: np.ndarray, summary: GenerationSummary) -> float | None:
    """The depth fill's time per timed generation (median, ms): its executes summed, counted
    apart from every phase; None at depth 0."""
    if not summary.depth_executes:
        return None
    step = np.arange(ms.size)
    gen, within = step // summary.executes_per_generation, step % summary.executes_per_generation
    keep = (within < summary.depth_executes) & (gen >= summary.warmup)
    n = summary.generations - summary.warmup
    return float(np.median(np.bincount(gen[keep] - summary.warmup, weights=ms[keep],
                                       minlength=n)[:n]))


def analyze_generation(events: pd.DataFrame, summary: GenerationSummary, *,
                       source: str = "ETDump", rules: Sequence[CategoryRule] | None = None,
                       prefill: KernelSources = NO_KERNELS,
                       decode: KernelSources = NO_KERNELS) -> GenerationResult:
    """Analyse the ETDump of one generation run (``events`` from
    :func:`pytest_sme2.readers.etdump.read_etdump`) with the runner's ``summary.generation``.
    ``prefill``/``decode``: each phase's kernel sources (the device's SME2, the executed or
    sampled kernels of its phase-only evidence process, ``RunRequest.phase_only``), for each
    phase's kernel evidence."""
    per_run = e2e_per_run(events, source=source)
    run_ids = per_run.index.to_numpy()
    if run_ids.size and not np.array_equal(run_ids, np.arange(run_ids.size)):
        missing = sorted(set(range(int(run_ids.max()) + 1)) - set(run_ids.tolist()))
        raise GenerationAnalysisError(f"{source}: Execute blocks without Method::execute (runs "
                                      f"{missing[:5]}): a truncated trace cannot be split into "
                                      "phases")
    gen_of, is_prefill = phase_tags(run_ids.size, summary.generations, summary.prefill_executes,
                                    summary.decode_executes, source, summary.depth_executes)
    warmup = summary.warmup
    if warmup >= summary.generations:
        raise GenerationAnalysisError(f"{source}: {warmup} warm-up generations leave none of "
                                      f"the {summary.generations} to measure")
    ms = per_run.to_numpy()
    timed = gen_of >= warmup
    n_timed = summary.generations - warmup
    tgen = gen_of - warmup

    def per_generation(mask: np.ndarray) -> np.ndarray:
        return np.bincount(tgen[mask], weights=ms[mask], minlength=n_timed)[:n_timed]

    pre, dec = timed & is_prefill, timed & ~is_prefill
    leaves = _Leaves(events, rules)
    pre_rows, dec_rows = leaves.rows(pre), leaves.rows(dec)
    prefill_ms = per_generation(pre)
    decode_ms = per_generation(dec)
    one_token_prefill = summary.prefill_executes == summary.prompt_tokens
    prefill_stats = _phase_stats(
        PREFILL, summary.prompt_tokens, summary.prefill_executes, prefill_ms,
        ms[pre] if one_token_prefill else None,
        leaves.categories_ms(pre_rows, n_timed, float(prefill_ms.mean())))
    decode_stats = _phase_stats(
        DECODE, summary.new_tokens, summary.decode_executes,
        decode_ms if dec.any() else np.zeros(0), ms[dec],
        leaves.categories_ms(dec_rows, n_timed, float(decode_ms.mean()))
        if dec.any() else {})
    if prefill.given:
        prefill_stats.kernel_evidence = phase_evidence(leaves.names(pre_rows), prefill)
        if dec.any():
            decode_stats.kernel_evidence = phase_evidence(leaves.names(dec_rows), decode)

    def runner_median(values: Sequence[float]) -> float | None:
        kept = list(values)[warmup:]
        return float(np.median(kept)) if kept else None

    first = list(summary.first_sampling_ms)[warmup:]
    ttft = (float(np.median(prefill_ms + np.asarray(first)))
            if len(first) == n_timed else None)
    return GenerationResult(
        prompt_tokens=summary.prompt_tokens, new_tokens=summary.new_tokens,
        dynamic_shape=summary.dynamic_shape, depth=summary.depth,
        depth_executes=summary.depth_executes, depth_ms=_fill_ms(ms, summary),
        generations=n_timed, warmup=warmup,
        prefill=prefill_stats, decode=decode_stats, ttft_ms=ttft,
        sampling_ms=runner_median(summary.sampling_ms),
        generation_ms=runner_median(summary.generation_ms), tokens=list(summary.tokens),
        max_seq_len=summary.max_seq_len, max_context_len=summary.max_context_len,
        vocab_size=summary.vocab_size, source=source, runner_report=summary.runner_report)


def analyze_generation_file(etdump: str | Path, stdout: str, **kwargs) -> GenerationResult:
    """:func:`analyze_generation` of an ETDump file and the runner's stdout (its summary)."""
    from pytest_sme2.readers.etdump import (  # pandas: only analyze_generation_file() needs it
        read_etdump)

    summary = parse_summary(stdout).generation
    if summary is None:
        raise GenerationAnalysisError(f"{etdump}: the runner printed no generation summary "
                                      "(was it run with --generate?)")
    return analyze_generation(read_etdump(etdump), summary, source=str(etdump), **kwargs)
