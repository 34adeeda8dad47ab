"""Session-wide benchmark settings: a module of its own, so the pytest plugin can read and check
its options without importing the analysis stack (pandas) into every pytest run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pytest_sme2.errors import Sme2Error

MIN_BLOCKS = 5                # interleaved blocks per side in a comparison
# A difference smaller than this is not called a difference, whatever the interval says:
# drift between processes on a shared machine is a few percent (see NOTES).
DEFAULT_MARGIN = 0.02
# Blocks measured again when the baseline gate suspects a regression (0: judge the first alone).
# On a 2-core VM one 2-thread process in ~15 starts (or stays) in a state where its threads do
# not run in parallel, ~1.6x slower for tens of ms to seconds: the median of three blocks
# outvotes that process; a real regression is in every block.
DEFAULT_CONFIRM_BLOCKS = 2

@dataclass(frozen=True)
class BenchSettings:
    """Session-wide settings (from pytest options, or given directly by library users)."""

    runs: int = 30
    warmup: int = 3
    report_dir: Path = Path("sme2-report")
    cache_dir: Path | None = None
    reexport: bool = False
    timeout_s: float = 600.0

    def __post_init__(self):
        if self.runs < 1:
            raise Sme2Error(f"--runs must be a positive number of timed runs, got {self.runs}")
        if self.warmup < 0:
            raise Sme2Error(f"--warmup must be 0 or more, got {self.warmup}")
        if not self.timeout_s > 0:
            raise Sme2Error(f"--sme2-timeout must be a positive number of seconds, got "
                            f"{self.timeout_s:g}")
