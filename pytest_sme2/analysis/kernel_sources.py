"""What says which kernels ran, beside an ETDump's operator names: :class:`KernelSources`, the
inputs of the SME2 verdict (:func:`pytest_sme2.analysis.kernels.sme2_verdict`) that
:func:`pytest_sme2.analysis.summary.analyze` and, per phase,
:func:`pytest_sme2.analysis.phases.analyze_generation` take. Light (no pandas), so the
generation analysis can name it at its top."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_sme2.analysis.kernel_sample import KernelSample
    from pytest_sme2.analysis.kernel_trace import KernelTrace


@dataclass(frozen=True)
class KernelSources:
    """``device_sme2``: whether the runner's process has SME2 (the device's hwcaps, less a
    mask; None: unknown); ``xnntrace``: the text of an XNNPACK kernel log; ``trace``: the
    kernels a process executed (QEMU; a :class:`KernelTrace` or its CSV's path); ``sample``:
    the kernels it was sampled running (a :class:`KernelSample` or its CSV's path);
    ``device_sme``: whether the process has SME (None: unknown), for the SME level's
    verdict."""

    device_sme2: bool | None = None
    xnntrace: str | None = None
    trace: KernelTrace | str | Path | None = None
    sample: KernelSample | str | Path | None = None
    device_sme: bool | None = None

    @property
    def given(self) -> bool:
        """Anything beyond the operator names: a verdict to make."""
        return self != NO_KERNELS


NO_KERNELS = KernelSources()     # the operator names alone: the default of every analysis
