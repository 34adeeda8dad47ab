"""Device facts recorded with every result: what the numbers were measured on."""

from __future__ import annotations

import os
import platform
import re
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pytest_sme2.versions import package_version


@dataclass(frozen=True)
class DeviceFacts:
    kind: str                       # host | android | macos
    serial: str
    model: str                      # board / machine model
    cpu: str                        # CPU or SoC name
    abi: str                        # x86_64, arm64-v8a, ...
    os: str
    kernel: str
    cores: int
    sme: bool | None                # None: could not tell
    sme2: bool | None
    executorch: str
    extra: dict = field(default_factory=dict)
    # An emulator (QEMU, a fake phone): its timings say nothing about speed.
    emulated: bool = False
    # What our runner is built for to run there, when the device names it (a fake phone);
    # "" : the device kind decides (devices/android/device.py).
    target: str = ""

    def to_dict(self) -> dict:
        """As results.json has always held them: ``emulated`` and ``target`` inside ``extra``
        (only when set)."""
        d = asdict(self)
        emulated, target = d.pop("emulated"), d.pop("target")
        d["extra"] = {**d["extra"], **({"emulated": True} if emulated else {}),
                      **({"target": target} if target else {})}
        return d

    @classmethod
    def from_dict(cls, d: dict) -> DeviceFacts:
        """What :meth:`to_dict` wrote (results.json's ``device``, less its ``spec``)."""
        extra = dict(d.get("extra") or {})
        emulated, target = bool(extra.pop("emulated", False)), str(extra.pop("target", ""))
        known = {k: d[k] for k in ("kind", "serial", "model", "cpu", "abi", "os", "kernel",
                                   "cores", "sme", "sme2", "executorch") if k in d}
        return cls(**known, extra=extra, emulated=emulated, target=target)

    @property
    def fingerprint(self) -> str:
        """What makes two measurements comparable: same CPU, ABI and SME2 capability."""
        return f"{self.kind}|{self.cpu}|{self.abi}|sme2={self.sme2}"


def cpu_features(cpuinfo: str) -> set[str]:
    """CPU feature words from /proc/cpuinfo text (``flags`` on x86, ``Features`` on Arm)."""
    feats: set[str] = set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() in ("flags", "features"):
            feats.update(value.split())
    return feats


def cpu_name(cpuinfo: str) -> str:
    for key in ("model name", "Hardware", "CPU part"):
        m = re.search(rf"^{key}\s*:\s*(.+)$", cpuinfo, re.MULTILINE)
        if m:
            return m.group(1).strip()
    return platform.processor() or "unknown"




def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _sysctl(name: str) -> str:
    try:
        return subprocess.run(["sysctl", "-n", name], capture_output=True, text=True,
                              timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def host_facts() -> DeviceFacts:
    system = platform.system()
    machine = platform.machine()
    extra: dict = {"python": platform.python_version()}
    if system == "Darwin":
        cpu = _sysctl("machdep.cpu.brand_string") or "Apple silicon"
        sme2_raw = _sysctl("hw.optional.arm.FEAT_SME2")
        sme_raw = _sysctl("hw.optional.arm.FEAT_SME")
        sme2 = sme2_raw == "1" if sme2_raw else None
        sme = sme_raw == "1" if sme_raw else None
        model = _sysctl("hw.model") or "mac"
        os_name = f"macOS {platform.mac_ver()[0]}"
    else:
        cpuinfo = _read("/proc/cpuinfo")
        feats = cpu_features(cpuinfo)
        cpu = cpu_name(cpuinfo)
        is_arm = machine in ("aarch64", "arm64")
        # x86 has no SME: a definite False. On Arm the Features line is authoritative.
        sme2 = ("sme2" in feats) if (is_arm and feats) else (False if not is_arm else None)
        sme = ("sme" in feats) if (is_arm and feats) else (False if not is_arm else None)
        model = _read("/sys/devices/virtual/dmi/id/product_name").strip() or machine
        os_name = " ".join(filter(None, [system, _os_release()]))
        gov = _read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor").strip()
        if gov:
            extra["governor"] = gov
    try:
        extra["cpus_allowed"] = sorted(os.sched_getaffinity(0))
    except AttributeError:
        pass
    return DeviceFacts(kind="host", serial=platform.node(), model=model, cpu=cpu, abi=machine,
                       os=os_name, kernel=platform.release(), cores=os.cpu_count() or 0,
                       sme=sme, sme2=sme2, executorch=package_version("executorch"), extra=extra)


def _os_release() -> str:
    m = re.search(r'^PRETTY_NAME="?([^"\n]+)"?', _read("/etc/os-release"), re.MULTILINE)
    return m.group(1) if m else ""
