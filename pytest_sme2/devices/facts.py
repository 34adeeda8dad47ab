"""Device facts recorded with every result: what the numbers were measured on."""

from __future__ import annotations

import os
import platform
import re
import subprocess
from pathlib import Path

from pytest_sme2.devices.kinds import HOST
from pytest_sme2.results.device import DeviceFacts
from pytest_sme2._util.versions import package_version

__all__ = ["DeviceFacts", "cpu_features", "cpu_name", "host_facts"]


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
    return DeviceFacts(kind=HOST.name, serial=platform.node(), model=model, cpu=cpu, abi=machine,
                       os=os_name, kernel=platform.release(), cores=os.cpu_count() or 0,
                       sme=sme, sme2=sme2, executorch=package_version("executorch"), extra=extra)


def _os_release() -> str:
    m = re.search(r'^PRETTY_NAME="?([^"\n]+)"?', _read("/etc/os-release"), re.MULTILINE)
    return m.group(1) if m else ""
