"""Decode against the memory-bandwidth limit (issue 38, part 6): the bytes a decode step reads
(:class:`pytest_sme2.results.generation.DecodeTraffic`), the GB/s that makes at the measured
tokens/s, and that figure against the device's measured copy bandwidth, as one line:

``decode reads 0.31 MB/token at 1.41 GB/s: 9% of this device's measured copy bandwidth
(16.6 GB/s)``.

GB are 10^9 bytes. The copy bandwidth counts bytes read plus bytes written (STREAM Copy's
convention); decode mostly reads, so 100% is not a hard ceiling, but the ratio says how close
to memory-bound a decode step runs.
"""

from __future__ import annotations

from pytest_sme2.readers.pte_traffic import DecodeBytes
from pytest_sme2.results.generation import DecodeTraffic, GenerationResult

EMULATED_LINE = ("decode memory traffic: not measured on an emulated CPU (QEMU's memory speed "
                 "is the host's through a translator)")


def mean_decode_position(prompt_tokens: int, new_tokens: int, depth: int = 0) -> float:
    """KV positions a decode step reads, mean over the D steps of a generation: step i runs
    the token at position depth + P + i and attends positions 0 .. depth + P + i."""
    return depth + prompt_tokens + (new_tokens + 1) / 2


def decode_traffic(read: DecodeBytes, g: GenerationResult, copy_gbps: float | None,
                   copy_source: str) -> DecodeTraffic:
    """What each decode step of ``g`` reads: plain attention the whole static cache
    (``g.max_context_len`` positions, at any depth), custom SDPA up to the step's position
    (so ``g.depth`` counts: bytes per token grow with it)."""
    whole = read.reads_whole_cache and bool(g.max_context_len)
    position = (float(g.max_context_len) if whole
                else mean_decode_position(g.prompt_tokens, g.new_tokens, g.depth))
    return DecodeTraffic(read.weight_bytes, read.kv_bytes_per_position, position, copy_gbps,
                         copy_source, whole_cache=whole)


def _mb(n: float) -> str:
    mb = n / 1e6
    return f"{mb:,.0f}" if mb >= 100 else f"{mb:.3g}"


def bandwidth_line(t: DecodeTraffic | None, tokens_per_s: float | None,
                   emulated: bool = False) -> str | None:
    """The decode bandwidth line; None when there is nothing to say."""
    if emulated:
        return EMULATED_LINE
    if t is None or not tokens_per_s:
        return None
    gbps = t.bytes_per_token * tokens_per_s / 1e9
    where = (f"all {t.mean_position:g} positions: plain attention reads the whole cache"
             if t.whole_cache else f"at position {t.mean_position:g}")
    kv = ("" if t.kv_bytes_per_position is None else
          f" (weights {_mb(t.weight_bytes)} MB + KV cache {_mb(t.bytes_per_token - t.weight_bytes)}"
          f" MB, {where})")
    head = f"decode reads {_mb(t.bytes_per_token)} MB/token{kv} at {gbps:.3g} GB/s"
    if t.copy_gbps is None:
        return f"{head}; no copy bandwidth to compare with ({t.copy_source or 'not measured'})"
    return (f"{head}: {100 * gbps / t.copy_gbps:.0f}% of this device's measured copy "
            f"bandwidth ({t.copy_gbps:.3g} GB/s)")
