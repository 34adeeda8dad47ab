"""The tokenizer ExecuTorch's own LLM runner (the wheel's ``TextLLMRunner``) needs: a generated
minimal one for any program, or a user's file.

The generated one (:func:`minimal_tokenizer`) is in llama2.c's ``tokenizer.bin`` format: four
int32 (vocabulary size, BOS id, EOS id, longest piece in bytes), then per token a float32 score,
an int32 length and the piece's bytes. Every token id has a piece of its own, one character
(:func:`piece`), so no two pieces concatenate into a third. The runner's encoder
(pytorch/tokenizers ``llama2c_tokenizer.cpp``) prepends the piece of ``" "`` (SentencePiece's
dummy prefix), looks each character up and merges pairs found in the vocabulary: here it merges
none. With ``" "`` the piece of the prompt's first id, the text of our prompt
(:func:`prompt_text`) encodes to exactly the ids our runners feed (:func:`~pytest_sme2.results.
generation.prompt_token_ids`), and each piece the runner hands back names its id. BOS and EOS
are ids past the vocabulary: the runner adds no BOS, and it never stops early on a sampled EOS
(our runners ignore EOS). Deterministic, cached per vocabulary size.

A user's tokenizer (``tokenizer.model``, ``tokenizer.json``, a tiktoken file or a llama2.c
``tokenizer.bin``) is taken as given; :func:`check_tokenizer_path` is the one line for a file
that is not there, the runner's process the one for a file its loaders refuse.
"""

from __future__ import annotations

import hashlib
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from pytest_sme2._util.fsutil import atomic_write_bytes
from pytest_sme2.errors import Sme2Error
from pytest_sme2.results.generation import prompt_token_ids

FORMAT_VERSION = 1          # of the generated file: a new layout is a new cache name
FIRST_CODEPOINT = 0x10000   # piece(i) = chr(FIRST_CODEPOINT + i): past the surrogates, 4 bytes
SPACE = " "
# What a user may pass (the runner's loaders, llm_runner_helper.cpp load_tokenizer).
USER_FORMATS = ("tokenizer.model (SentencePiece)", "tokenizer.json (Hugging Face)",
                "a tiktoken file", "a llama2.c tokenizer.bin")


class TokenizerError(Sme2Error):
    pass


@dataclass(frozen=True)
class PromptText:
    """What the runner is given for a prompt of ``ids``: the text, and how to read its sampled
    pieces back as ids (None for a user's tokenizer: its pieces need not name one id each)."""

    text: str
    ids: tuple[int, ...]
    vocab_size: int

    def id_of(self, piece_text: str) -> int | None:
        """The id of a piece the runner handed back (None: not one of ours)."""
        if piece_text == SPACE:
            return self.ids[0] if self.ids else None
        if len(piece_text) != 1:
            return None
        i = ord(piece_text) - FIRST_CODEPOINT
        return i if 0 <= i < self.vocab_size and i != space_id(self.vocab_size) else None


def space_id(vocab_size: int) -> int:
    """The id whose piece is ``" "``: the first id of every prompt of this vocabulary."""
    return prompt_token_ids(1, vocab_size)[0]


def piece(token: int, vocab_size: int) -> str:
    return SPACE if token == space_id(vocab_size) else chr(FIRST_CODEPOINT + token)


def minimal_tokenizer_bytes(vocab_size: int) -> bytes:
    """The generated ``tokenizer.bin`` of a ``vocab_size`` vocabulary."""
    if not 2 <= vocab_size <= 0x10FFFF - FIRST_CODEPOINT:
        raise TokenizerError(f"cannot generate a tokenizer for a vocabulary of {vocab_size} "
                             "tokens; pass the model's own tokenizer")
    parts = [struct.pack("<4i", vocab_size, vocab_size + 1, vocab_size, 4)]
    for token in range(vocab_size):
        data = piece(token, vocab_size).encode()
        parts.append(struct.pack("<fi", 0.0, len(data)) + data)
    return b"".join(parts)


def tokenizer_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pytest-sme2" / "tokenizers"


def minimal_tokenizer(vocab_size: int, cache_dir: Path | None = None) -> Path:
    """The generated tokenizer of a ``vocab_size`` vocabulary, written once (the same bytes
    every time: its name holds their hash)."""
    data = minimal_tokenizer_bytes(vocab_size)
    digest = hashlib.sha256(data).hexdigest()[:12]
    path = (cache_dir or tokenizer_cache_dir()) / (
        f"minimal-v{FORMAT_VERSION}-vocab{vocab_size}-{digest}.bin")
    if not path.is_file() or path.stat().st_size != len(data):
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, data)
    return path


def prompt_text(ids: list[int] | tuple[int, ...], vocab_size: int) -> PromptText:
    """The text the generated tokenizer encodes to ``ids`` (a prompt of
    :func:`prompt_token_ids`: its first id is the dummy prefix's)."""
    ids = tuple(ids)
    if not ids or ids[0] != space_id(vocab_size):
        raise TokenizerError(f"a prompt for the generated tokenizer starts with id "
                             f"{space_id(vocab_size)} (its ' '), not {ids[:1]}")
    return PromptText("".join(piece(t, vocab_size) for t in ids[1:]), ids, vocab_size)


def check_tokenizer_path(path: str | Path, where: str) -> Path:
    """``path`` as an absolute path when it is a file; else the one line (``where``: the option
    or call that named it)."""
    p = Path(path).expanduser()
    if not p.is_file():
        what = "is a folder, not a file" if p.is_dir() else "does not exist"
        raise TokenizerError(f"{where}: tokenizer {p} {what}; pass the model's "
                             f"{', '.join(USER_FORMATS)}, or none for the generated one")
    return p.absolute()
