"""The tokenizer ExecuTorch's TextLLMRunner is given (issue 45): one generated for any
vocabulary, read by the wheel's own C++ llama2.c tokenizer exactly as our prompt ids, and a
user's file checked in one line."""

from __future__ import annotations

import struct

import pytest

from pytest_sme2.programs.llm import tokenizer as tok
from pytest_sme2.results.generation import prompt_token_ids


@pytest.mark.parametrize("vocab", [32, 512, 151936])
def test_the_generated_tokenizer_encodes_our_prompt_to_its_ids(tmp_path, vocab):
    import pytorch_tokenizers  # the wheel's C++ tokenizers, the ones TextLLMRunner runs

    path = tok.minimal_tokenizer(vocab, tmp_path)
    reader = pytorch_tokenizers.CppLlama2cTokenizer()
    reader.load(str(path))
    assert reader.vocab_size() == vocab
    ids = prompt_token_ids(64, vocab)
    fed = tok.prompt_text(ids, vocab)
    # No BOS, no EOS: exactly the ids our runners feed, the first one the dummy prefix.
    assert reader.encode(fed.text, 0, 0) == ids
    # Every piece it hands back names its id; EOS and BOS lie past the vocabulary.
    assert [fed.id_of(tok.piece(t, vocab)) for t in ids] == ids
    assert fed.id_of("ab") is None and fed.id_of(chr(tok.FIRST_CODEPOINT + vocab)) is None
    assert reader.eos_tok() == vocab and reader.bos_tok() == vocab + 1


def test_it_is_written_once_and_the_same_every_time(tmp_path):
    first = tok.minimal_tokenizer(512, tmp_path)
    mtime = first.stat().st_mtime_ns
    assert tok.minimal_tokenizer(512, tmp_path) == first
    assert first.stat().st_mtime_ns == mtime
    data = first.read_bytes()
    assert struct.unpack("<4i", data[:16]) == (512, 513, 512, 4)
    assert data == tok.minimal_tokenizer_bytes(512)


def test_a_prompt_must_start_with_the_dummy_prefix_id():
    with pytest.raises(tok.TokenizerError, match="starts with id 14"):
        tok.prompt_text([3, 4], 512)


def test_a_missing_tokenizer_is_one_line(tmp_path):
    with pytest.raises(tok.TokenizerError) as e:
        tok.check_tokenizer_path(tmp_path / "tokenizer.model", "--sme2-tokenizer")
    assert str(e.value).startswith("--sme2-tokenizer: tokenizer ")
    assert "does not exist" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(tok.TokenizerError, match="is a folder, not a file"):
        tok.check_tokenizer_path(tmp_path, "sme2_generate(tokenizer=...)")
    given = tmp_path / "t.bin"
    given.write_bytes(b"x")
    assert tok.check_tokenizer_path(given, "x") == given
