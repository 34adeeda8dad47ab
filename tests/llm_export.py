"""A tiny Llama exported by ExecuTorch's own ``export_llama`` (a user's .pte as that script makes
it), with seeded random weights, cached on disk across test sessions.

Why a checkpoint: without ``--checkpoint`` the script builds the model on the meta device and
calls ``to_empty``: the weights are uninitialised memory (measured here: every logit -inf, argmax
0 at every step, and not the same from one export to the next). A seeded checkpoint of the same
architecture gives deterministic weights and token ids that differ from step to step, which the
generation tests compare across runners and generations.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import warnings
from pathlib import Path

from pytest_sme2._util import buildcache

PARAMS = {"dim": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "vocab_size": 512,
          "multiple_of": 32, "norm_eps": 1e-5}
MAX_SEQ_LEN = 128
# export_llama flags per scheme; plain attention (-kv without --use_sdpa_with_kv_cache): the
# wheel registers no llama:: custom ops.
SCHEMES = {
    "fp32": [],
    "8da4w": ["-qmode", "8da4w", "--group_size", "32"],
}


def cache_root() -> Path:
    return buildcache.cache_root() / "test-llm"


def _key(scheme: str, extra: list[str]) -> str:
    from importlib.metadata import version

    text = json.dumps([PARAMS, MAX_SEQ_LEN, SCHEMES[scheme], extra, version("executorch"),
                       version("torch")])
    return f"{scheme}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def write_checkpoint(path: Path, seed: int = 0) -> Path:
    import torch
    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs

    torch.manual_seed(seed)
    model = construct_transformer(ModelArgs(**PARAMS, max_seq_len=MAX_SEQ_LEN,
                                            max_context_len=MAX_SEQ_LEN))
    with torch.no_grad():  # default init leaves the norms at one; scale for varied logits
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.5 / p.shape[-1] ** 0.5 * 4)
    torch.save(model.state_dict(), path)
    return path


def export_tiny_llama(scheme: str = "8da4w", extra: list[str] | None = None,
                      root: Path | None = None) -> Path:
    """The .pte of the tiny Llama for ``scheme``, exported once per cache folder."""
    return export_tiny_llamas([(scheme, list(extra or []))], root)[0]


def export_tiny_llamas(wanted: list[tuple[str, list[str]]], root: Path | None = None
                       ) -> list[Path]:
    """The .pte of each (scheme, extra flags), those not cached exported at once: each
    export_llama is one process busy on one core for about a minute."""
    started = []
    for scheme, extra in wanted:
        folder = (root or cache_root()) / _key(scheme, extra)
        pte = folder / "m.pte"
        started.append((folder, None if pte.is_file() else _start(folder, scheme, extra)))
    return [_finish(folder, proc) for folder, proc in started]


def _start(folder: Path, scheme: str, extra: list[str]) -> subprocess.Popen:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "params.json").write_text(json.dumps(PARAMS))
    write_checkpoint(folder / "weights.pth")
    cmd = [sys.executable, "-m", "executorch.examples.models.llama.export_llama",
           "--params", "params.json", "--checkpoint", "weights.pth", "-kv", "-X",
           *SCHEMES[scheme], "--max_seq_length", str(MAX_SEQ_LEN),
           "--max_context_length", str(MAX_SEQ_LEN), "-d", "fp32",
           "--output_name", "partial.pte", *extra]
    with open(folder / "export.log", "w") as log:   # a file: no pipe for it to fill and wait on
        return subprocess.Popen(cmd, cwd=folder, stdout=log, stderr=subprocess.STDOUT)


def _finish(folder: Path, proc: subprocess.Popen | None) -> Path:
    pte = folder / "m.pte"
    if proc is None:
        return pte
    try:
        proc.wait(timeout=1200)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if proc.returncode != 0 or not (folder / "partial.pte").is_file():
        log = (folder / "export.log").read_text(errors="replace")
        raise RuntimeError(f"export_llama failed ({proc.returncode}): {log[-2000:]}")
    (folder / "partial.pte").rename(pte)
    return pte


if __name__ == "__main__":
    for s in sys.argv[1:] or ["8da4w"]:
        print(export_tiny_llama(s))


def export_static_program(path: Path, vocab: int = 32) -> Path:
    """A (tokens[1, 1], input_pos[1]) -> logits[1, vocab] program without a dynamic length and
    without state: the prompt goes token by token, and the next token is a function of the
    token and its position alone, so every generation samples the same tokens."""
    import torch
    from executorch.exir import to_edge

    class Static(torch.nn.Module):
        def forward(self, tokens: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
            target = (tokens[:, -1] * 5 + input_pos * 3 + 1) % vocab
            return -(torch.arange(vocab).unsqueeze(0) - target.unsqueeze(1)).abs().float()

    args = (torch.tensor([[3]], dtype=torch.long), torch.tensor([0], dtype=torch.long))
    path.write_bytes(to_edge(torch.export.export(Static(), args)).to_executorch().buffer)
    return path


def export_leaky_program(path: Path, vocab: int = 16) -> Path:
    """A (tokens[1, 1], input_pos[1]) -> logits[1, vocab] program whose state survives between
    generations: a mutable buffer counts every execute and the logits follow it, not
    ``input_pos``. The same prompt then samples other tokens in the second generation: what
    the runners must refuse (the program does not reset its KV cache)."""
    import torch
    from executorch.exir import to_edge

    class Leaky(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("steps", torch.zeros(1, dtype=torch.long))

        def forward(self, tokens: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
            self.steps.add_(1)
            target = (tokens[:, -1] + self.steps) % vocab
            return -(torch.arange(vocab).unsqueeze(0) - target.unsqueeze(1)).abs().float()

    args = (torch.tensor([[3]], dtype=torch.long), torch.tensor([0], dtype=torch.long))
    with warnings.catch_warnings():  # "Mutation on a buffer ... meaningless initial state":
        warnings.simplefilter("ignore")  # the point of this program
        program = to_edge(torch.export.export(Leaky(), args)).to_executorch()
    path.write_bytes(program.buffer)
    return path
