"""Kernels proven by sampling: which micro-kernels a process was caught executing.

The preload library (``pytest_sme2/device_programs/preload.c``) samples the runner's program
counter on a CPU-time timer signal and writes, at exit, ``pc count`` lines (hex address, samples)
after a ``# samples N dropped D hz H`` line; it also copies the process's ``/proc/self/maps``.
Mapped through the libraries' symbol tables (:mod:`.addresses`), a sampled address inside
``kai_..._sme2_mopa`` proves that kernel executed on that CPU: this works on real silicon,
where no emulator traces anything.

What sampling cannot do: prove absence. A short kernel may get no sample, so "no SME2 kernel
sampled" is an observation with a sample count, never a verdict of its own.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from pytest_sme2.analysis.addresses import (AddressMap, MappedRegion, SymbolTable, check_tally,
                                            kernel_kind, library_resolver, parse_maps, tally)
from pytest_sme2.analysis.isa import isa_family, kernel_isa
from pytest_sme2.analysis.kernel_csv import TOTAL, read_kernel_csv, write_kernel_csv
from pytest_sme2.errors import Sme2Error
from pytest_sme2.results.records import SampledKernel

__all__ = ["KernelSample", "SampledKernel", "attribute_samples", "parse_samples",
           "read_kernel_sample_csv", "sampled_kernels", "write_kernel_sample_csv"]

SAMPLE_COLUMNS = ["name", "isa_family", "isa", "kind", "library", "samples", "share"]
TOTAL_NAME = "(all samples)"
_HEADER = re.compile(r"^#\s*samples\s+(\d+)\s+dropped\s+(\d+)(?:\s+hz\s+(\d+))?")


@dataclass(frozen=True, eq=False)
class KernelSample:
    """What the sampler saw in one process: micro-kernel rows (``SAMPLE_COLUMNS``) and the
    number of samples taken (in kernels or not)."""

    source: str
    kernels: pd.DataFrame
    samples_total: int

    @property
    def sampled(self) -> tuple[SampledKernel, ...]:
        return tuple(SampledKernel(r.name, r.isa_family, r.kind, r.library, int(r.samples),
                                   float(r.share))
                     for r in self.kernels.itertuples(index=False))

    def summary(self) -> str:
        fams = Counter(self.kernels["isa_family"])
        ran = ", ".join(f"{fam} {n}" for fam, n in sorted(fams.items())) or "none"
        in_kernels = int(self.kernels["samples"].sum())
        return (f"{self.source}: {self.samples_total} samples, {in_kernels} in "
                f"{len(self.kernels)} micro-kernels by ISA: {ran}")


def parse_samples(text: str) -> tuple[dict[int, int], int]:
    """(address -> samples, samples taken) from the preload library's sample file. Taken counts
    samples the buffer dropped too; a file without its header line is not one of ours."""
    lines = text.splitlines()
    header = _HEADER.match(lines[0]) if lines else None
    if header is None:
        raise Sme2Error("not a pytest-sme2 sample file (no '# samples N dropped D' first line)")
    counts: dict[int, int] = {}
    for line in lines[1:]:
        fields = line.split()
        if len(fields) != 2:
            continue
        try:
            counts[int(fields[0], 16)] = counts.get(int(fields[0], 16), 0) + int(fields[1])
        except ValueError:
            continue
    return counts, int(header.group(1))


def sampled_kernels(samples: Path, maps: Path, libraries_root: Path | None = None, *,
                    symbols: Callable[[str], SymbolTable | None] | None = None) -> KernelSample:
    """The micro-kernels one process was sampled in, from its sample file and its maps copy.
    ``symbols``: a library path from the maps -> its symbol table (default: the file, or the
    file of that name under ``libraries_root``)."""
    samples, maps = Path(samples), Path(maps)
    try:
        counts, taken = parse_samples(samples.read_text(errors="replace"))
    except OSError as e:
        raise Sme2Error(f"{samples}: cannot read the sample file ({e.strerror}); the runner "
                        "must exit normally for the preload library to write it") from None
    except Sme2Error as e:
        raise Sme2Error(f"{samples}: {e}") from None
    if taken == 0:
        raise Sme2Error(f"{samples}: the sampler got no samples (the process used less CPU time "
                        "than one timer period); run more executions")
    try:
        regions = parse_maps(maps.read_text(errors="replace"))
    except OSError as e:
        raise Sme2Error(f"{maps}: cannot read the address map ({e.strerror}); the runner must "
                        "exit normally for the preload library to write it") from None
    return attribute_samples(counts, taken, regions, symbols or library_resolver(libraries_root),
                             source=str(samples), maps_source=str(maps))


def attribute_samples(counts: dict[int, int], taken: int, regions: Iterable[MappedRegion],
                      symbols: Callable[[str], SymbolTable | None], *,
                      source: str = "samples", maps_source: str = "maps") -> KernelSample:
    """Attribute sampled addresses to micro-kernels; ``taken`` is the share's denominator."""
    where = AddressMap(regions, symbols)
    t = tally(((address, n, 0) for address, n in counts.items()), where)
    if t.total:
        check_tally(t, where, "sampled addresses", source, maps_source)
    # Named by the micro-kernel's entry point (kai_run_X for its body kai_kernel_X too), as
    # the trace names what it saw enter: the two sources' names compare.
    rows = [(key, isa_family(kernel_isa(key)), kernel_isa(key), kernel_kind(key), lib, n,
             round(n / taken, 4)) for (lib, key), (n, _, _) in t.kernels.items()]
    frame = pd.DataFrame(rows, columns=SAMPLE_COLUMNS).sort_values(
        ["samples", "name"], ascending=[False, True], kind="stable").reset_index(drop=True)
    return KernelSample(source, frame.astype({"samples": int, "share": float}), taken)


def write_kernel_sample_csv(sample: KernelSample, path: Path) -> Path:
    """The ``--kernel-sample`` CSV: one row per sampled micro-kernel (``SAMPLE_COLUMNS``), then
    a ``total`` row named ``(all samples)`` holding every sample taken."""
    total = pd.DataFrame([(TOTAL_NAME, "", "", TOTAL, "", sample.samples_total, 1.0)],
                         columns=SAMPLE_COLUMNS)
    frame = pd.concat([sample.kernels, total], ignore_index=True) if len(sample.kernels) \
        else total
    return write_kernel_csv(frame, path)


def read_kernel_sample_csv(path: str | Path) -> KernelSample:
    """Read what :func:`write_kernel_sample_csv` wrote."""
    frame, total = read_kernel_csv(path, SAMPLE_COLUMNS, "kernel-sample", "--kernel-sample")
    try:
        kernels = frame[frame["kind"] != TOTAL][SAMPLE_COLUMNS].astype(
            {"samples": int, "share": float}).reset_index(drop=True)
        taken = int(total["samples"].iloc[0])
    except (TypeError, ValueError):
        raise Sme2Error(f"{path}: sample counts are not numbers; write it again") from None
    return KernelSample(str(path), kernels, taken)
