"""Session-wide benchmark settings: a module of its own, so the pytest plugin can read its
options without importing the analysis stack (pandas) into every pytest run. Option values are
checked where they are read (:func:`pytest_sme2.measure.config.config_from_options`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pytest_sme2.devices.thermal import CooldownPolicy
from pytest_sme2.errors import Sme2Error
from pytest_sme2.results.generation import Generation

MIN_BLOCKS = 6                # interleaved blocks per side in a comparison: the fewest pairs
# a distribution-free 95% interval exists for (pytest_sme2.stats.hodges_lehmann)
# Cold loads per benchmark (--sme2-loads): the block's own process and load-only processes
# (load + one execute each), so load time and first inference are medians, not one process.
DEFAULT_LOADS = 3
# Operator-traced runs per block (--sme2-trace-runs), beside the untraced timed ones: enough for
# a stable mean per category (the breakdown averages them), few enough to cost little.
DEFAULT_TRACE_RUNS = 10


@dataclass(frozen=True)
class BenchSettings:
    """How each benchmark is measured (from pytest options, or given directly by library
    users)."""

    runs: int = 30
    warmup: int = 3
    report_dir: Path = Path("sme2-report")
    cache_dir: Path | None = None
    reexport: bool = False
    timeout_s: float = 600.0
    loads: int = DEFAULT_LOADS
    cooldown: CooldownPolicy | None = None   # --sme2-cooldown: hold each block until cool
    sample: str = "auto"      # --sme2-sample: an evidence process sampling kernels (auto|on|off)
    # --sme2-probe: time the machine-state probe in each block's process (auto: not on an
    # emulated CPU, whose speed means nothing; on; off).
    probe: str = "auto"
    # An LLM's generation (pytest_sme2.measure.generation): prompt tokens prefilled, then
    # greedy decode steps, per run (--sme2-prompt-tokens, --sme2-new-tokens).
    prompt_tokens: int = 64
    new_tokens: int = 32
    # --sme2-tokenizer: the LLM's tokenizer for a runner that takes text (text_llm_runner);
    # None: one generated for the program (pytest_sme2.programs.llm.tokenizer).
    tokenizer: Path | None = None
    # Traced runs per block (generations for an LLM), after the untraced timed ones
    # (RunRequest.untraced; runners that cannot time untraced trace their timed runs instead).
    trace_runs: int = DEFAULT_TRACE_RUNS

    def generation(self, prompt_tokens: int | None = None, new_tokens: int | None = None,
                   depth: int = 0, tokenizer: str | Path | None = None) -> Generation:
        """The one place a generation is made from what a test asked: each token count it
        left out is the session's (--sme2-prompt-tokens, --sme2-new-tokens), and so is the
        tokenizer. A bad count is one line (Sme2Error)."""
        given = tokenizer if tokenizer is not None else self.tokenizer
        try:
            return Generation(prompt_tokens or self.prompt_tokens,
                              self.new_tokens if new_tokens is None else new_tokens, depth or 0,
                              tokenizer=str(given) if given is not None else None)
        except ValueError as e:
            raise Sme2Error(str(e)) from None
