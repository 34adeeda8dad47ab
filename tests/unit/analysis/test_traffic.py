"""What a decode step reads (issue 38, part 6), by attention form (issue 45): custom SDPA reads
the filled positions, so the depth counts; plain attention reads its whole static cache."""

from __future__ import annotations

import pytest

from pytest_sme2.analysis.traffic import bandwidth_line, decode_traffic
from pytest_sme2.readers.pte_traffic import DecodeBytes
from pytest_sme2.results.generation import DecodeTraffic, GenerationResult

KV_PER_POSITION = 1000      # bytes, all layers, K and V


def _gen(depth: int) -> GenerationResult:
    return GenerationResult(prompt_tokens=64, new_tokens=32, depth=depth, max_context_len=4096)


def _read(whole_cache: bool) -> DecodeBytes:
    return DecodeBytes(10_000, KV_PER_POSITION, reads_whole_cache=whole_cache)


def test_the_depth_counts_in_the_kv_position_a_custom_sdpa_step_reads():
    at_0 = decode_traffic(_read(False), _gen(0), 20.0, "measured")
    at_2048 = decode_traffic(_read(False), _gen(2048), 20.0, "measured")
    assert not at_0.whole_cache and not at_2048.whole_cache
    assert at_0.mean_position == 64 + 33 / 2
    assert at_2048.mean_position == 2048 + 64 + 33 / 2      # bytes per token grow with depth
    assert at_2048.bytes_per_token - at_0.bytes_per_token == 2048 * KV_PER_POSITION
    assert "at position 2128.5" in bandwidth_line(at_2048, 100.0)


def test_plain_attention_reads_the_whole_cache_at_every_depth():
    for depth in (0, 2048):
        t = decode_traffic(_read(True), _gen(depth), 20.0, "measured")
        assert (t.whole_cache, t.mean_position) == (True, 4096)
    line = bandwidth_line(t, 100.0)
    assert "all 4096 positions: plain attention reads the whole cache" in line
    assert line.startswith("decode reads 4.11 MB/token (weights 0.01 MB + KV cache 4.1 MB")


@pytest.mark.parametrize("stored", [{}, {"whole_cache": False}])
def test_a_document_without_the_form_reads_as_up_to_the_position(stored):
    t = DecodeTraffic.from_json({"weight_bytes": 1, "kv_bytes_per_position": 2,
                                 "mean_position": 3.0, **stored})
    assert t.whole_cache is False
