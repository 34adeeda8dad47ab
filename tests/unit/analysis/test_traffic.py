"""What a decode step reads (issue 38, part 6), by attention form (issue 45): custom SDPA reads
the filled positions, so the depth counts; plain attention reads its whole static cache."""

from __future__ import annotations

import pytest

from pytest_sme2.analysis.traffic import FILLED, WHOLE_CACHE, bandwidth_line, decode_traffic
from pytest_sme2.results.generation import GenerationResult
from pytest_sme2.results.traffic import DecodeTraffic

KV_PER_POSITION = 1000      # bytes, all layers, K and V


def _gen(depth: int) -> GenerationResult:
    return GenerationResult(prompt_tokens=64, new_tokens=32, depth=depth, max_context_len=4096)


def test_the_depth_counts_in_the_kv_position_a_custom_sdpa_step_reads():
    at_0 = decode_traffic(10_000, KV_PER_POSITION, _gen(0), 20.0, "measured")
    at_2048 = decode_traffic(10_000, KV_PER_POSITION, _gen(2048), 20.0, "measured")
    assert at_0.kv_reads == at_2048.kv_reads == FILLED
    assert at_0.mean_position == 64 + 33 / 2
    assert at_2048.mean_position == 2048 + 64 + 33 / 2      # bytes per token grow with depth
    assert at_2048.bytes_per_token - at_0.bytes_per_token == 2048 * KV_PER_POSITION
    line = bandwidth_line(at_2048, 100.0)
    assert "at position 2128.5" in line


def test_plain_attention_reads_the_whole_cache_at_every_depth():
    for depth in (0, 2048):
        t = decode_traffic(10_000, KV_PER_POSITION, _gen(depth), 20.0, "measured",
                           whole_cache=True)
        assert (t.kv_reads, t.mean_position) == (WHOLE_CACHE, 4096)
    line = bandwidth_line(t, 100.0)
    assert "all 4,096 positions: plain attention reads the whole cache" in line
    assert line.startswith("decode reads 4.11 MB/token (weights 0.01 MB + KV cache 4.1 MB")


@pytest.mark.parametrize("stored", [{}, {"kv_reads": "filled"}])
def test_a_document_without_the_form_reads_as_filled(stored):
    t = DecodeTraffic.from_json({"weight_bytes": 1, "kv_bytes_per_position": 2,
                                 "mean_position": 3.0, **stored})
    assert t.kv_reads == FILLED
