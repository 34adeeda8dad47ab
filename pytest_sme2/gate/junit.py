"""A gate verdict as JUnit ``record_property`` pairs, so CI systems show medians and ratios
beside the test (``sme2_gate_status``, ``sme2_gate_instructions_ratio``,
``sme2_gate_time_to_first_token_status``, ``sme2_gate_GEMM_ratio``, ...)."""

from __future__ import annotations

import re

from pytest_sme2.results.judgement import TIME, Judgement


def junit_properties(judgement: Judgement) -> list[tuple[str, object]]:
    """``record_property`` pairs, so CI systems show medians and ratios beside the test."""
    def name(text: str) -> str:   # "time to first token" -> "time_to_first_token"
        return re.sub(r"[^A-Za-z0-9]+", "_", text)

    pre = "sme2_gate" + (f"_{name(judgement.measure)}" if judgement.measure != TIME else "") \
        + (f"_{name(judgement.category)}" if judgement.category else "")
    props: list[tuple[str, object]] = [(f"{pre}_status", judgement.status)]
    r = judgement.ratio
    if r is not None:
        props += [(f"{pre}_baseline_median", round(judgement.baseline_median or 0.0, 6)),
                  (f"{pre}_current_median", round(judgement.current_median or 0.0, 6)),
                  (f"{pre}_ratio", round(r.point, 4)), (f"{pre}_ratio_ci_low", round(r.low, 4)),
                  (f"{pre}_ratio_ci_high", round(r.high, 4)),
                  (f"{pre}_noise_floor_pct", round(judgement.noise_floor_pct or 0.0, 2)),
                  (f"{pre}_baseline_sessions", judgement.baseline_sessions),
                  (f"{pre}_current_blocks", judgement.current_blocks)]
        if judgement.against != "baseline":      # pairs measured in this session
            props.append((f"{pre}_pairs", judgement.current_blocks))
    if judgement.changed_since_baseline:
        props.append((f"{pre}_changed_since_baseline",
                      ", ".join(judgement.changed_since_baseline)))
    props += [(f"{pre}_threshold_pct", judgement.threshold_pct),
              (f"{pre}_reason", judgement.reason)]
    return props
