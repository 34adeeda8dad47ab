"""Whether a benchmark computed numbers at all: outputs (an LLM's sampled logits) that hold NaN or
infinity mean the timings are of NaN and inf arithmetic, whose paths differ from real ones on
many CPUs, not of the model. The runners check once per process (the last outputs; the first
generation's sampled steps), outside the timed span; this names the likely cause."""

from __future__ import annotations

from pytest_sme2.analysis.runner_summary import RunnerSummary

UNINITIALISED = ("the logits are not finite: weights look uninitialised (export_llama without "
                 "--checkpoint?)")


def output_problem(summary: RunnerSummary) -> str | None:
    """One sentence on non-finite outputs, or None when the runner saw none (or did not
    check: a user's runner)."""
    g = summary.generation
    if g is not None:
        steps = g.nonfinite_steps
        if not steps:
            return None
        sampled = g.new_tokens + 1
        if len(set(g.tokens)) <= 1:     # argmax of NaN/-inf rows: the same token every step
            return f"{UNINITIALISED}; every sampled token is {g.tokens[0] if g.tokens else '?'}"
        return (f"the logits are not finite at {steps} of {sampled} sampled steps: the timings "
                "are of NaN/inf arithmetic (an overflow in this dtype or scheme?)")
    n = summary.nonfinite_outputs
    if not n:
        return None
    return (f"the outputs hold {n} non-finite values (NaN or inf): the timings are of NaN/inf "
            "arithmetic, not of the model's (uninitialised weights, or an overflow in this "
            "dtype?)")
