"""A user's ``llama_main`` (ExecuTorch's LLM runner binary, examples/models/llama/main.cpp) as a
runner: it tokenizes a text prompt, generates, and prints ``PyTorchObserver {json}``
(:mod:`pytest_sme2.analysis.llm_observer`); built with the event tracer it writes an ETDump to
``--etdump_path``.

Flags passed (upstream gflags): ``--model_path --tokenizer_path --prompt --seq_len
--temperature 0 --cpu_threads --etdump_path --ignore_eos`` and ``--warmup`` (one warm-up
generation, upstream's bool) when the request has warm-up generations. It runs one timed
generation per process. Its prompt is text, so its prompt token count is its tokenizer's
(the report says it); ours is ``P`` words. The tokenizer is a data file
(:meth:`LlamaMainRunner.data_files`): on a phone it is pushed beside the model and the command
names its path there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pytest_sme2.runners.base import RunnerError, RunRequest
from pytest_sme2.runners.binary import BinaryRunner

PROMPT_WORD = "hello"


def is_llama_main(path: Path | str) -> bool:
    return Path(path).name.startswith("llama_main")


@dataclass(frozen=True)
class LlamaMainRunner(BinaryRunner):
    tokenizer: Path | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        if self.tokenizer is None:
            raise RunnerError(f"runner {self.name!r}: a llama_main needs its tokenizer; add "
                              "tokenizer=/path/to/tokenizer.model (or .json/.bin) to --runner")
        tokenizer = Path(self.tokenizer).expanduser().absolute()
        if not tokenizer.is_file():
            raise RunnerError(f"runner {self.name!r}: tokenizer {tokenizer} does not exist")
        object.__setattr__(self, "tokenizer", tokenizer)
        super().__post_init__()
        self.info.labels["runner"] = "llama_main"
        self.info.labels["tokenizer"] = str(tokenizer)

    def data_files(self) -> list[Path]:
        assert self.tokenizer is not None
        return [self.tokenizer]

    def command(self, request: RunRequest) -> list[str]:
        g = request.generation
        if g is None:
            raise RunnerError(f"runner {self.name!r} is a llama_main: it runs LLM generations "
                              "only (the request has no generation)")
        if g.depth:
            raise RunnerError(f"runner {self.name!r} is a llama_main: it cannot fill a context "
                              f"depth ({g.depth} tokens) before its prompt; measure depth 0 "
                              "with it, or use the native or python runner")
        argv = [str(self.path), "--model_path", str(request.pte),
                "--tokenizer_path", str(self.tokenizer),
                "--prompt", " ".join([PROMPT_WORD] * g.prompt_tokens),
                "--seq_len", str(g.prompt_tokens + g.new_tokens + 1),
                "--temperature", "0",
                "--cpu_threads", str(request.threads), "--etdump_path", str(request.etdump),
                "--ignore_eos"]
        if request.warmup > 0:
            argv.append("--warmup")
        return argv
