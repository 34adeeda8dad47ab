"""What a long export needs and how it is going: the machine's memory checked before the
export starts (one line when it is short), a progress line at each stage and another every
``EVERY_S`` seconds (:mod:`pytest_sme2._util.heartbeat`) of a stage still running, and the
export's peak memory.

Kept apart from ``export.py``, whose source is part of every export's cache key: the figures
measured here can be corrected without making every cached export a miss.
"""

from __future__ import annotations

import resource
import time
from typing import Callable

from pytest_sme2._util.heartbeat import EVERY_S, Heartbeat
from pytest_sme2.programs.exported import ExportError
from pytest_sme2.units import byte_size

# Peak resident memory of an export over its model's parameters and buffers, measured on the
# Qwen3-0.6B-shaped Llama (800M, docs/measurements/llm-0.6b.md): 8da8w 10.9 B, 8da4w 10.5 B (the
# float model, its quantized copy, the exported and lowered programs, the serialized program
# and the ETRecord coexist); 12 B leaves 10% for the machine's other needs. fp32 and the
# models' dtypes were not measured at this size: 16 B (the float weights twice more).
BYTES_PER_PARAMETER = {"8da8w": 12.0, "8da4w": 12.0, "8da4w-pc": 12.0}
DEFAULT_BYTES_PER_PARAMETER = 16.0


def mem_available() -> int | None:
    """The kernel's estimate of memory available without swapping (``MemAvailable``), bytes;
    None where /proc/meminfo does not say (not Linux)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def current_rss() -> int:
    """This process's resident memory now, bytes (0 where /proc does not say)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):
        return 0


def peak_rss() -> int:
    """This process's peak resident memory so far, bytes (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def parameter_count(module) -> int:
    """Parameters and buffers (a KV cache is a buffer) of a torch module, unique tensors."""
    seen = {id(t): t.numel() for t in (*module.parameters(), *module.buffers())}
    return sum(seen.values())


def memory_needed(parameters: int, dtype: str) -> int:
    return int(parameters * BYTES_PER_PARAMETER.get(dtype, DEFAULT_BYTES_PER_PARAMETER))


def check_memory(what: str, parameters: int, dtype: str, available: int | None = None,
                 held: int | None = None) -> None:
    """One line before an export the machine cannot hold: the estimate (parameters x bytes
    per parameter, measured) against ``MemAvailable`` plus what this process already holds
    (the built model is part of the estimate). Silent where the kernel does not say."""
    available = mem_available() if available is None else available
    if available is None:
        return
    held = current_rss() if held is None else held
    need = memory_needed(parameters, dtype)
    if need > available + held:
        per = BYTES_PER_PARAMETER.get(dtype, DEFAULT_BYTES_PER_PARAMETER)
        raise ExportError(
            f"exporting {what} needs about {byte_size(need)} of memory at its peak "
            f"({parameters / 1e6:,.0f}M parameters x {per:g} B, measured) but this machine has "
            f"{byte_size(available)} available (MemAvailable) beside the "
            f"{byte_size(held)} this process holds; free memory or export on a larger "
            "machine and pass the .pte")


class ExportWatch(Heartbeat):
    """The progress of one export: :meth:`stage` says each stage with its elapsed time; while
    entered, ``still at <stage>`` (with this process's resident memory) comes after every
    :data:`~pytest_sme2._util.heartbeat.EVERY_S` seconds without a line."""

    def __init__(self, say: Callable[[str], None], what: str, every: float = EVERY_S,
                 clock: Callable[[], float] = time.perf_counter):
        super().__init__(say, self._still, every, clock)
        self.what = what
        self.current = "build"

    def stage(self, name: str) -> None:
        self.current = name
        self.say(f"  {self.what}: {name} ({self.elapsed():.1f} s)")

    def _still(self, elapsed: float) -> str:
        return (f"  {self.what}: still at {self.current} ({elapsed:.0f} s, "
                f"{byte_size(current_rss())} resident)")
