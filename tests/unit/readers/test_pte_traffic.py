"""What a decode step reads, from the program alone (issue 49, item 5): one row of the
embedding table wherever the table lives (in the .pte, or in the .ptd a ``?weights=ptd`` export
writes), and the KV cache at the positions its attention reads: all of the static cache for
plain attention, up to the step's position for custom SDPA."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_sme2.analysis.traffic import bandwidth_line, decode_traffic
from pytest_sme2.readers.pte_traffic import decode_bytes
from pytest_sme2.results.generation import GenerationResult
from tests.fakes.pte_programs import llm_program_bytes

VOCAB, DIM, CONTEXT, OTHER = 512, 64, 128, 60_000
ROW = DIM * 4                       # one fp32 row of the table
TABLE = VOCAB * ROW


def _program(tmp_path: Path, *, ptd: bool, attention: str = "aten::bmm"
             ) -> tuple[Path, Path | None]:
    pte = tmp_path / ("split.pte" if ptd else "whole.pte")
    pte.write_bytes(llm_program_bytes(vocab=VOCAB, dim=DIM, context=CONTEXT,
                                      other_weight_bytes=OTHER, embedding_in_ptd=ptd,
                                      attention=attention))
    if not ptd:
        return pte, None
    data = tmp_path / "split.ptd"
    data.write_bytes(bytes(TABLE))      # the table is the .ptd's only weight here
    return pte, data


def test_one_row_of_the_embedding_table_is_counted_wherever_the_table_lives(tmp_path):
    whole = decode_bytes(*_program(tmp_path, ptd=False), context_len=CONTEXT)
    split = decode_bytes(*_program(tmp_path, ptd=True), context_len=CONTEXT)
    assert whole.embedding_bytes == split.embedding_bytes == TABLE
    assert whole.weight_bytes == split.weight_bytes == OTHER + ROW
    assert whole.kv_bytes_per_position == split.kv_bytes_per_position == 2 * 2 * 8 * 4
    assert whole.kv_buffers == 2


@pytest.mark.parametrize("attention,whole_cache", [("aten::bmm", True),
                                                   ("llama::custom_sdpa", False)])
def test_the_kv_term_is_at_the_positions_the_attention_reads(tmp_path, attention, whole_cache):
    read = decode_bytes(*_program(tmp_path, ptd=False, attention=attention), context_len=CONTEXT)
    assert read.reads_whole_cache is whole_cache
    g = GenerationResult(prompt_tokens=64, new_tokens=32, max_context_len=CONTEXT)
    traffic = decode_traffic(read, g, 20.0, "measured")
    assert traffic.whole_cache is whole_cache
    assert traffic.mean_position == (CONTEXT if whole_cache else 64 + 33 / 2)
    line = bandwidth_line(traffic, 1000.0)
    if whole_cache:
        assert "KV cache 0.0164 MB, all 128 positions: plain attention reads the whole cache)" \
            in line
    else:
        assert "KV cache 0.0103 MB, at position 80.5)" in line
