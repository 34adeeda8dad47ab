"""An LLM measured as a generation: what one run generates (:class:`Generation`, carried on
``RunRequest.generation``) and what the analysis found per phase (:class:`PhaseStats`,
:class:`GenerationResult`, with ``to_json``/``from_json`` for results.json), with what a decode
step reads from memory (:class:`DecodeTraffic`, on ``GenerationResult.traffic``).

One generation = prefill (P prompt tokens: one ``Method::execute`` where forward's sequence
length is dynamic, P one-token executes where it is not) + decode (D executes of one token,
greedy argmax, EOS ignored). The runner samples one token from the prefill's logits and one
after each decode step: D + 1 token ids per generation, the positions 0 .. P + D - 1 used.

At context depth K (llama-bench's ``@ dK``) each generation first fills the KV cache with K
tokens at positions 0 .. K - 1, untimed (executes of up to ``depth_chunk`` tokens: the
program's longest forward where 0), then its prompt and decode steps run at K .. K + P + D - 1
and are timed: ``pp P @ dK``, ``tg D @ dK``.

The prompt is fixed and the same in every runner (:func:`prompt_token_ids`), so token ids are
comparable across runners and SME2 on/off.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pytest_sme2.results import codec   # codec.decode: GenerationResult has a field `decode`
from pytest_sme2.results.codec import NOT_STORED, added, decode_optional, encode
from pytest_sme2.results.device import DeviceFacts, RunnerInfo
from pytest_sme2.results.judgement import PREFILL as PREFILL_TIME, TTFT as TTFT_TIME
from pytest_sme2.results.records import KernelEvidence
from pytest_sme2.results.startup import Startup

PREFILL = "prefill"
DECODE = "decode"
PHASES = (PREFILL, DECODE)
TTFT = "ttft"
# A generation's phases judged, kept and charted one value per block beside its decode steps
# (the block's own end to end): the key results.json (``baseline_phases``), baselines
# (``prefill_ms``, ``ttft_ms``) and the history's series use, and the gate's measure name.
BLOCK_PHASES: dict[str, str] = {PREFILL: PREFILL_TIME, TTFT: TTFT_TIME}


@dataclass(frozen=True)
class Generation:
    """What one run generates: ``prompt_tokens`` (P) then ``new_tokens`` (D) decode steps.
    ``RunRequest.warmup`` and ``.runs`` count generations when a request carries one."""

    prompt_tokens: int = 64
    new_tokens: int = 32
    depth: int = 0          # K: tokens in the KV cache before the prompt, filled untimed
    depth_chunk: int = 0    # tokens per execute of the fill; 0: the program's longest forward
    # A tokenizer file for a runner that takes text (ExecuTorch's TextLLMRunner); None: the
    # runner's own, else one generated for the program. Our runners feed token ids.
    tokenizer: str | None = None

    def __post_init__(self) -> None:
        if self.prompt_tokens < 1 or self.new_tokens < 0:
            raise ValueError(f"a generation needs prompt_tokens >= 1 and new_tokens >= 0, got "
                             f"{self.prompt_tokens},{self.new_tokens}")
        if self.depth < 0 or self.depth_chunk < 0:
            raise ValueError(f"a context depth is 0 or more tokens, got {self.depth}")

    @property
    def arg(self) -> str:
        """The runners' ``--generate`` value: ``P,D``, at depth ``P,D,K`` (``P,D,K,C`` with a
        fill chunk)."""
        extra = (f",{self.depth}" if self.depth else "") + (
            f",{self.depth_chunk}" if self.depth and self.depth_chunk else "")
        return f"{self.prompt_tokens},{self.new_tokens}{extra}"

    @property
    def positions(self) -> int:
        """KV-cache positions one generation uses (must fit max_context_len)."""
        return self.depth + self.prompt_tokens + self.new_tokens

    def executes(self, dynamic_shape: bool) -> int:
        """``Method::execute`` calls per generation, the prompt's and the decode steps' (a
        depth fill's depend on the program's longest forward: the runner's summary counts
        them)."""
        return (1 if dynamic_shape else self.prompt_tokens) + self.new_tokens

    def prefill_only(self) -> Generation:
        """The prefill-only evidence process: P tokens, no decode step. Under QEMU the trace
        logs each translated block once per process, so only a process that runs one phase
        tells which kernels that phase ran."""
        return Generation(self.prompt_tokens, 0, self.depth, self.depth_chunk, self.tokenizer)

    def decode_only(self) -> Generation:
        """The decode-only evidence process: only one-token executes, at positions
        0 .. D - 1 (a one-token "prompt", then D - 1 decode steps): the decode kernels. At
        depth K its fill goes one token per execute (a longer one would run prefill kernels),
        and its steps run at K .. K + D - 1."""
        return Generation(1, max(self.new_tokens - 1, 0), self.depth, 1 if self.depth else 0,
                          self.tokenizer)


def parse_generate(text: str) -> Generation:
    """A runner's ``--generate P,D[,K[,C]]`` (:attr:`Generation.arg`); ValueError names it."""
    parts = text.split(",")
    try:
        if not 2 <= len(parts) <= 4:
            raise ValueError
        return Generation(*(int(p) for p in parts))
    except ValueError:
        raise ValueError(f"--generate: {text!r} is not PROMPT_TOKENS,NEW_TOKENS[,DEPTH"
                         "[,DEPTH_CHUNK]] of whole numbers (e.g. 64,32 or 64,32,512)") from None


def llama_bench_name(phase: str, tokens: int, depth: int = 0) -> str:
    """llama-bench's name of a phase's test: ``pp64``, ``tg32``, ``pp64 @ d512``."""
    name = f"{'pp' if phase == PREFILL else 'tg'}{tokens}"
    return f"{name} @ d{depth}" if depth else name


def context_token_ids(depth: int, n: int, vocab: int) -> tuple[list[int], list[int]]:
    """The depth fill's token ids and the prompt's: one fixed sequence of ``depth + n``
    (:func:`prompt_token_ids`), the first ``depth`` filling the cache; at depth 0 the prompt is
    the one every earlier version used."""
    ids = prompt_token_ids(depth + n, vocab)
    return ids[:depth], ids[depth:]


def prompt_token_ids(n: int, vocab: int) -> list[int]:
    """The fixed prompt: token i is ``1 + (7919 i + 13) mod (vocab - 1)``, in [1, vocab). The
    native runner (runner.cpp ``prompt_ids``) computes the same."""
    span = vocab - 1 if vocab > 1 else 1
    return [1 + (7919 * i + 13) % span for i in range(n)]


@dataclass
class PhaseStats:
    """One phase of the timed generations. Latencies are per generation (the phase's
    ``Method::execute`` times summed within a generation), per-token ones per execute of one
    token (decode; prefill token by token), all in ms from the ETDump."""

    phase: str = ""
    tokens: int = 0                 # tokens the phase processes per generation (P or D)
    executes: int = 0               # Method::execute calls per generation in this phase
    generations: int = 0            # timed generations
    median_ms: float | None = None  # the phase's time per generation
    p90_ms: float | None = None
    cv_pct: float | None = None
    tokens_per_s: float | None = None   # tokens / median_ms
    token_median_ms: float | None = None  # per one-token execute (None: no such execute)
    token_p90_ms: float | None = None
    token_cv_pct: float | None = None
    categories_ms: dict[str, float] = field(default_factory=dict)  # mean ms per generation
    kernel_evidence: KernelEvidence | None = None  # from this phase's own evidence process
    # The phase's time in each timed generation, in order (llama-bench's samples: one per
    # repetition); empty in documents written before it was kept.
    samples_ms: list[float] = field(default_factory=list, metadata=added())

    to_json = encode
    from_json = classmethod(codec.decode)


@dataclass(frozen=True)
class DecodeTraffic:
    """What an LLM's decode step reads from memory, and the device's copy bandwidth it is set
    against (issue 38, part 6). The bytes come from the program
    (:mod:`pytest_sme2.readers.pte_traffic`), the bandwidth from the device's probe
    (:mod:`pytest_sme2.devices.bandwidth`); the line is
    :func:`pytest_sme2.analysis.traffic.bandwidth_line`'s."""

    weight_bytes: int                   # weights one decode step touches (embedding: a row)
    kv_bytes_per_position: int | None   # the KV cache, all layers, K and V (None: not found)
    mean_position: float                # KV positions a decode step reads, mean over steps
    copy_gbps: float | None = None      # the device's measured copy bandwidth (read + written)
    copy_source: str = ""               # how it was had ("measured", "cached in ...") or why not
    # Plain attention reads every position of the static cache at every step (mean_position is
    # then the cache's length); False: attention up to the step's position (custom SDPA).
    whole_cache: bool = False

    @property
    def bytes_per_token(self) -> float:
        return self.weight_bytes + (self.kv_bytes_per_position or 0) * self.mean_position

    to_json = encode
    from_json = classmethod(decode_optional)


@dataclass
class GenerationResult:
    """A measured generation: per phase stats, time to first token, the sampled tokens."""

    prompt_tokens: int = 0
    new_tokens: int = 0
    dynamic_shape: bool = True      # prefill in one execute
    depth: int = 0                  # tokens in the KV cache before the prompt (untimed fill)
    depth_executes: int = 0         # Method::execute calls of the fill, per generation
    depth_ms: float | None = None   # the fill's time per generation (median), in no phase
    generations: int = 0            # timed generations (warm-up ones dropped)
    warmup: int = 0
    prefill: PhaseStats = field(default_factory=lambda: PhaseStats(PREFILL))
    decode: PhaseStats = field(default_factory=lambda: PhaseStats(DECODE))
    ttft_ms: float | None = None    # median over generations of prefill + first sampling
    sampling_ms: float | None = None  # median per generation, the runner's timer (argmax)
    generation_ms: float | None = None  # median wall time of a whole generation, runner's timer
    tokens: list[int] = field(default_factory=list)  # sampled ids: D + 1 per generation
    max_seq_len: int | None = None
    max_context_len: int | None = None
    vocab_size: int | None = None
    source: str = ""
    # A runner's own report of the generation, as it printed it (ExecuTorch's llama_main: its
    # PyTorchObserver line's load_ms, prefill_ms, decode_ms, ttft_ms, tokens/s and token
    # counts; ExecuTorch's TextLLMRunner, "runner": "text_llm_runner": its stats.h figures in
    # whole ms, medians and per generation); None for our runners, whose figures are our own.
    runner_report: dict[str, Any] | None = field(default=None, metadata=added())
    # What a decode step reads (weights + KV cache) and the device's copy bandwidth; None
    # where it was not measured (an emulated device, an older document).
    traffic: DecodeTraffic | None = field(default=None, metadata=added())
    # Where and how it ran, for ``sme2_generate``'s caller; results.json keeps them once, on
    # the block that holds this generation, so they are not written here.
    startup: Startup | None = field(default=None, compare=False, repr=False,
                                    metadata=NOT_STORED)
    device: DeviceFacts | None = field(default=None, compare=False, repr=False,
                                       metadata=NOT_STORED)
    runner: RunnerInfo | None = field(default=None, compare=False, repr=False,
                                      metadata=NOT_STORED)

    def bench_name(self, name: str) -> str:
        """llama-bench's name of phase ``name``: ``pp64``, ``tg32 @ d512``."""
        tokens = self.prompt_tokens if name == PREFILL else self.new_tokens
        return llama_bench_name(name, tokens, self.depth)

    def phase(self, name: str) -> PhaseStats:
        if name not in PHASES:
            raise KeyError(f"no phase {name!r}; phases are {', '.join(PHASES)}")
        return self.prefill if name == PREFILL else self.decode

    def block_phase(self, key: str) -> float | None:
        """This generation's one value of a phase of :data:`BLOCK_PHASES` (its ``key``): the
        median over its generations, None where it was not timed."""
        return self.prefill.median_ms if key == PREFILL else self.ttft_ms

    to_json = encode
    from_json = classmethod(codec.decode)
