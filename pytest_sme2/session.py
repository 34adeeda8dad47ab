"""What one benchmarking session holds: its settings, its device, and what it has measured so
far — written to ``results.json`` after every benchmark so an interrupted session loses nothing."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pytest_sme2.bench import BenchSettings
from pytest_sme2.devices.base import Device, open_device
from pytest_sme2.results import BenchmarkResult, write_results

RESULTS_FILE = "results.json"


@dataclass
class BenchSession:
    settings: BenchSettings
    device_spec: str = "host"
    results: list[BenchmarkResult] = field(default_factory=list)
    _device: Device | None = None

    @property
    def results_path(self) -> Path:
        return self.settings.report_dir / RESULTS_FILE

    def device(self) -> Device:
        if self._device is None:
            self._device = open_device(self.device_spec)
        return self._device

    def add(self, result: BenchmarkResult) -> None:
        self.results.append(result)
        self.write()

    def write(self) -> None:
        if self.results:
            write_results(self.results_path, self.results)
