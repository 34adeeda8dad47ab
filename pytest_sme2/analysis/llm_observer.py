"""ExecuTorch's LLM runner report, parsed: the ``PyTorchObserver {json}`` line that
``llama_main`` (``extension/llm/runner/stats.h``, ``print_report``) prints after a generation.

Its fields are wall-clock timestamps in ms (``SCALING_FACTOR_UNITS_PER_SECOND`` = 1000) and
token counts. Upstream derives, and so do we:

* load = ``model_load_end_ms - model_load_start_ms``;
* prefill = ``prompt_eval_end_ms - inference_start_ms`` (includes tokenizer encode);
* decode = ``inference_end_ms - prompt_eval_end_ms``;
* TTFT = ``first_token_ms - inference_start_ms`` (model load excluded, as upstream);
* prefill tokens/s = ``prompt_tokens`` / prefill; decode tokens/s = ``generated_tokens`` /
  decode (upstream's ``prefill_token_per_sec`` / ``decode_token_per_sec``, which newer runners
  print themselves and older ones do not).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

MARKER = "PyTorchObserver "


@dataclass(frozen=True)
class ObserverStats:
    prompt_tokens: int
    generated_tokens: int
    load_ms: float | None
    prefill_ms: float | None
    decode_ms: float | None
    ttft_ms: float | None
    prefill_tokens_per_s: float | None
    decode_tokens_per_s: float | None
    sampling_ms: float | None
    raw: dict = field(default_factory=dict, compare=False, repr=False)


def _span(d: dict, end: str, start: str, scale: float) -> float | None:
    a, b = d.get(end), d.get(start)
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or not a or not b:
        return None
    return (a - b) * 1e3 / scale


def parse_observer_line(line: str) -> ObserverStats:
    """One ``PyTorchObserver {json}`` line (the marker may follow log text on the same line).
    Raises ValueError when it is not one."""
    at = line.find(MARKER)
    if at < 0:
        raise ValueError("not a PyTorchObserver line")
    d = json.loads(line[at + len(MARKER):].strip())
    if not isinstance(d, dict):
        raise ValueError("PyTorchObserver carries no JSON object")
    scale = float(d.get("SCALING_FACTOR_UNITS_PER_SECOND") or 1000)
    prompt, generated = int(d.get("prompt_tokens", 0)), int(d.get("generated_tokens", 0))
    prefill = _span(d, "prompt_eval_end_ms", "inference_start_ms", scale)
    decode = _span(d, "inference_end_ms", "prompt_eval_end_ms", scale)

    def rate(key: str, tokens: int, ms: float | None) -> float | None:
        if isinstance(d.get(key), (int, float)):
            return float(d[key])
        return 1e3 * tokens / ms if ms else None

    sampling = d.get("aggregate_sampling_time_ms")
    return ObserverStats(
        prompt_tokens=prompt, generated_tokens=generated,
        load_ms=_span(d, "model_load_end_ms", "model_load_start_ms", scale),
        prefill_ms=prefill, decode_ms=decode,
        ttft_ms=_span(d, "first_token_ms", "inference_start_ms", scale),
        prefill_tokens_per_s=rate("prefill_token_per_sec", prompt, prefill),
        decode_tokens_per_s=rate("decode_token_per_sec", generated, decode),
        sampling_ms=float(sampling) * 1e3 / scale if isinstance(sampling, (int, float))
        else None, raw=d)


def parse_observer(stdout: str) -> list[ObserverStats]:
    """Every report in a runner's output, in order (llama_main prints one per timed
    generation; its ``--warmup`` generation prints none)."""
    out = []
    for line in stdout.splitlines():
        if MARKER in line:
            try:
                out.append(parse_observer_line(line))
            except ValueError:
                continue
    return out
