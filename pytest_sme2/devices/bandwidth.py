"""A device's measured memory copy bandwidth: what an LLM's decode GB/s is set against
(issue 38, part 6). The copy-bandwidth probe (``device_programs/copy_bandwidth.c``, built with
the other target helpers) copies a 128 MB buffer, best of 5, with 1 thread and with every CPU;
the larger figure is the device's. Cached per device (its kind, serial, CPU, model and kernel)
under ``~/.cache/pytest-sme2/copy-bandwidth/``: a later session reads it back, runs nothing.

Emulated devices measure nothing: QEMU's memory speed is the host's, through a translator.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pytest_sme2.device_programs import parse_probe
from pytest_sme2.devices.facts import DeviceFacts
from pytest_sme2._util.buildcache import cache_root
from pytest_sme2.results.codec import encode

BUFFER_MB = 128
REPEATS = 5
TIMEOUT_S = 120.0


@dataclass(frozen=True)
class CopyBandwidth:
    """The device's copy bandwidth (GB/s, read + written), or why there is none."""

    gbps: float | None
    threads: int = 0
    source: str = ""            # "measured", "cached <date>" or why not

    to_json = encode


def cache_file(facts: DeviceFacts, cache_dir: Path | None = None) -> Path:
    ident = "\0".join([facts.kind, facts.serial, facts.cpu, facts.model, facts.kernel,
                       str(facts.cores)])
    key = hashlib.sha256(ident.encode()).hexdigest()[:16]
    return Path(cache_dir or cache_root() / "copy-bandwidth") / f"{facts.kind}-{key}.json"


def run_probe(argv: list[str], what: str) -> dict:
    """Run the probe on this machine; its ``key value`` lines."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RuntimeError(f"the copy-bandwidth probe on {what} failed: {e}") from None
    if proc.returncode != 0:
        raise RuntimeError(f"the copy-bandwidth probe on {what} exited with status "
                           f"{proc.returncode}: {proc.stderr.strip()[:200]}")
    return parse_probe(proc.stdout)


def measure(facts: DeviceFacts, probe: Callable[[int], dict],
            cache_dir: Path | None = None) -> CopyBandwidth:
    """The cached figure for this device, else the probe's best of 1 thread and all CPUs
    (``probe(threads)`` runs it there and returns its lines)."""
    if facts.emulated:
        return CopyBandwidth(None, source="emulated CPU: its memory bandwidth is the host's "
                                          "through a translator, not the device's")
    path = cache_file(facts, cache_dir)
    if path.is_file():
        try:
            d = json.loads(path.read_text())
            return CopyBandwidth(float(d["gbps"]), int(d["threads"]), f"cached in {path}")
        except (ValueError, KeyError, TypeError):
            pass                # a damaged cache is measured again
    best = CopyBandwidth(None, source="the probe printed no copy_gbps")
    for threads in sorted({1, max(facts.cores, 1)}):
        got = probe(threads).get("copy_gbps")
        if isinstance(got, float) and (best.gbps is None or got > best.gbps):
            best = CopyBandwidth(got, threads, "measured")
    if best.gbps is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({**best.to_json(), "device": facts.label}) + "\n")
    return best
