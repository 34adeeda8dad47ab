"""Session-wide benchmark settings: a module of its own, so the pytest plugin can read its
options without importing the analysis stack (pandas) into every pytest run. Option values are
checked where they are read (:func:`pytest_sme2.measure.config.config_from_options`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pytest_sme2.thermal import CooldownPolicy

MIN_BLOCKS = 5                # interleaved blocks per side in a comparison
# A difference smaller than this is not called a difference, whatever the interval says:
# drift between processes on a shared machine is a few percent (see NOTES).
DEFAULT_MARGIN = 0.02
# Blocks measured again when the baseline gate suspects a regression (0: judge the first alone).
# On a 2-core VM one 2-thread process in ~15 starts (or stays) in a state where its threads do
# not run in parallel, ~1.6x slower for tens of ms to seconds: the median of three blocks
# outvotes that process; a real regression is in every block.
DEFAULT_CONFIRM_BLOCKS = 2
# Cold loads per benchmark (--sme2-loads): the block's own process and load-only processes
# (load + one execute each), so load time and first inference are medians, not one process.
DEFAULT_LOADS = 3


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
