"""What an Android phone is, read in one adb shell round trip: getprop, uname, per-CPU cpufreq,
the allowed CPUs, thermal zones and SME/SME2 (the auxiliary vector first, /proc/cpuinfo second).
Pure parsing lives here so it is testable without a phone; android.py runs the script."""

from __future__ import annotations

import re

from pytest_sme2.devices.base import DeviceError
from pytest_sme2.devices.facts import DeviceFacts, cpu_features
from pytest_sme2.devices.kinds import ANDROID
from pytest_sme2.devices.thermal import is_cpu_zone, throttling_causes
from pytest_sme2.results.records import ThermalState
from pytest_sme2._util.versions import package_version

PROPS = ("ro.product.manufacturer", "ro.product.model", "ro.soc.manufacturer", "ro.soc.model",
         "ro.board.platform", "ro.hardware", "ro.product.cpu.abi", "ro.build.version.release",
         "ro.build.version.sdk", "ro.build.fingerprint", "ro.pytest_sme2.target",
         "ro.pytest_sme2.emulator")
# Only pytest-sme2's fake phones (tests/fakes/adb_device.py) set the two ro.pytest_sme2.*
# properties: a real phone runs bionic programs (native-runner target "android", an NDK build).
# A fake names what it runs instead: "host" (the host's own programs) or "aarch64-linux-gnu"
# (glibc aarch64 programs under QEMU, with ro.pytest_sme2.emulator saying which).
TARGET_PROP, EMULATOR_PROP = "ro.pytest_sme2.target", "ro.pytest_sme2.emulator"
AT_HWCAP2 = 26
HWCAP2_SME, HWCAP2_SME2 = 1 << 23, 1 << 37

# Thermal zones: "thermal <zone> <type...> <millidegrees>". Unreadable temps print nothing.
THERMAL_SCRIPT = ('for z in /sys/class/thermal/thermal_zone*; do '
                  'echo "thermal ${z##*/} $(cat $z/type 2>/dev/null) $(cat $z/temp 2>/dev/null)"; '
                  'done')

# What --sme2-cooldown looks at (pytest_sme2.devices.thermal), in one round trip: the zones, the
# cooling devices ("cooling <device> <type...> <cur_state>") and the thermal service's dump
# between markers (no dumpsys, or no permission: nothing between them).
THERMAL_STATE_SCRIPT = "; ".join([
    THERMAL_SCRIPT,
    'for c in /sys/class/thermal/cooling_device*; do echo "cooling ${c##*/} '
    '$(cat $c/type 2>/dev/null) $(cat $c/cur_state 2>/dev/null)"; done',
    'echo dumpsys-begin', 'dumpsys thermalservice 2>/dev/null', 'echo dumpsys-end',
])
_HAL_TEMP = re.compile(r"Temperature\{mValue=(-?[\d.]+), mType=(-?\d+), mName=([^,}]*)")
HAL_TYPE_CPU = 0                          # android.os.Temperature.TYPE_CPU

# One line per fact, each starting with a keyword, so a missing tool or file only loses a line.
# /proc/self is the reading process (grep, od): its affinity and auxv are any fresh process's.
FACTS_SCRIPT = "; ".join([
    f'for p in {" ".join(PROPS)}; do echo "prop $p=$(getprop $p)"; done',
    'echo "kernel $(uname -r)"',
    'for c in /sys/devices/system/cpu/cpu[0-9]*; do echo "cpu ${c##*/cpu} '
    '$(cat $c/cpufreq/cpuinfo_max_freq 2>/dev/null || echo -) '
    '$(cat $c/cpufreq/scaling_governor 2>/dev/null || echo -) '
    '$(cat $c/cpu_capacity 2>/dev/null || echo -)"; done',
    'echo "allowed $(grep Cpus_allowed_list /proc/self/status 2>/dev/null | cut -d: -f2)"',
    'echo auxv $(od -v -A n -t u8 /proc/self/auxv 2>/dev/null)',   # unquoted: one line
    'echo "features $(grep -m 1 ^Features /proc/cpuinfo 2>/dev/null | cut -d: -f2)"',
    THERMAL_SCRIPT,
])


def parse_cpu_list(text: str) -> list[int]:
    """``0-3,6`` -> [0, 1, 2, 3, 6]; junk -> []."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        m = re.fullmatch(r"\s*(\d+)(?:-(\d+))?\s*", part)
        if not m:
            return []
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        cpus.extend(range(lo, hi + 1))
    return cpus


def auxv_hwcap2(od_words: str) -> int | None:
    """AT_HWCAP2 from ``od -A n -t u8 /proc/self/auxv`` output: (type, value) u64 pairs."""
    words = [int(w) for w in od_words.split() if w.isdigit()]
    for i in range(0, len(words) - 1, 2):
        if words[i] == AT_HWCAP2:
            return words[i + 1]
        if words[i] == 0:
            break
    return None


def parse_thermal(text: str) -> dict[str, float]:
    """Zone temperatures in degrees C, keyed by zone type (``type (thermal_zoneN)`` when two
    zones share a type)."""
    temps: dict[str, float] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 4 or fields[0] != "thermal" or not re.fullmatch(r"-?\d+", fields[-1]):
            continue
        zone, kind, raw = fields[1], " ".join(fields[2:-1]), int(fields[-1])
        key = kind if kind not in temps else f"{kind} ({zone})"
        temps[key] = raw / 1000 if abs(raw) >= 1000 else float(raw)   # most report m°C
    return temps


def parse_thermal_state(text: str) -> ThermalState:
    """What :data:`THERMAL_STATE_SCRIPT` printed, as :mod:`pytest_sme2.devices.thermal` judges it:
    CPU zones, the thermal HAL's CPU temperatures ("Current temperatures from HAL", not the
    service's cache), cooling device states and the thermal status."""
    zones = parse_thermal(text)
    cpu = {z: t for z, t in zones.items() if is_cpu_zone(z)}
    cooling: dict[str, int] = {}
    status: int | None = None
    in_dump = in_hal = False
    for line in text.splitlines():
        fields = line.split()
        if line == "dumpsys-begin" or line == "dumpsys-end":
            in_dump, in_hal = line == "dumpsys-begin", False
        elif in_dump:
            if line.startswith("Thermal Status:") and fields[-1].isdigit():
                status = int(fields[-1])
            elif not line[:1].isspace():        # a new section of the dump
                in_hal = line.startswith("Current temperatures from HAL")
            elif in_hal and (m := _HAL_TEMP.search(line)) and int(m.group(2)) == HAL_TYPE_CPU:
                name = f"HAL {m.group(3).strip()}"
                cpu[name] = max(cpu.get(name, float("-inf")), float(m.group(1)))
        elif len(fields) >= 3 and fields[0] == "cooling" and fields[-1].isdigit():
            kind = " ".join(fields[2:-1]) or fields[1]
            cooling[kind] = max(cooling.get(kind, 0), int(fields[-1]))
    return ThermalState(cpu_c=cpu, throttling=throttling_causes(cooling, status),
                        zones=tuple(zones))


CLUSTER_NAMES = {1: ("all",), 2: ("little", "big"), 3: ("little", "mid", "big")}


def clusters(max_khz: dict[int, int], capacity: dict[int, int] | None = None) -> list[dict]:
    """CPUs grouped by sysfs ``cpu_capacity`` (Android's scheduler's view) where the kernel
    gives it, else by maximum frequency, slowest first, each named (little, mid, big; with
    more: cluster0 .. N)."""
    groups: dict[tuple[int, int], list[int]] = {}
    for cpu, khz in sorted(max_khz.items()):
        groups.setdefault(((capacity or {}).get(cpu, 0), khz), []).append(cpu)
    ordered = sorted(groups.items())
    names = CLUSTER_NAMES.get(len(ordered), tuple(f"cluster{i}" for i in range(len(ordered))))
    return [{"name": name, "cpus": cpus, "max_khz": khz,
             **({"capacity": cap} if cap else {})}
            for name, ((cap, khz), cpus) in zip(names, ordered)]


def fastest_cpus(max_khz: dict[int, int], threads: int) -> list[int]:
    """The fastest cluster, widened with the next-fastest cores until ``threads`` fit."""
    chosen: list[int] = []
    for group in reversed(clusters(max_khz)):
        if chosen and len(chosen) >= threads:
            break
        chosen.extend(group["cpus"])
    return sorted(chosen)


def cpu_mask(cpus: list[int]) -> str:
    return format(sum(1 << c for c in cpus), "x")


def check_mask(mask: str, cores: int, serial: str) -> str:
    """A user's taskset mask as hex without 0x; DeviceError naming the mask if it is bad."""
    text = mask.strip().lower().removeprefix("0x")
    if not re.fullmatch(r"[0-9a-f]+", text):
        raise DeviceError(f"taskset mask {mask!r} is not a hexadecimal CPU mask (e.g. f0 = CPUs "
                          "4-7); fix --sme2-taskset")
    value = int(text, 16)
    if value == 0:
        raise DeviceError(f"taskset mask {mask!r} selects no CPU; fix --sme2-taskset")
    outside = [c for c in range(value.bit_length()) if value >> c & 1 and c >= cores]
    if outside:
        raise DeviceError(f"taskset mask {mask!r} selects CPU {_ranges(outside)} but device "
                          f"{serial} has {cores} CPUs (0-{cores - 1}); fix --sme2-taskset")
    return format(value, "x")


def _ranges(cpus: list[int]) -> str:
    """[8, 9, 10, 12] -> "8-10,12"."""
    out: list[str] = []
    start = prev = cpus[0]
    for cpu in cpus[1:] + [-1]:
        if cpu == prev + 1:
            prev = cpu
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = cpu
    return ",".join(out)


def parse_facts(text: str, serial: str) -> DeviceFacts:
    props: dict[str, str] = {}
    max_khz: dict[int, int] = {}
    governors: dict[int, str] = {}
    capacity: dict[int, int] = {}
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(" ")
        if key == "prop":
            name, _, value = rest.partition("=")
            props[name] = value.strip()
        elif key == "cpu":
            fields = rest.split()
            if fields and fields[0].isdigit():
                cpu = int(fields[0])
                max_khz[cpu] = int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else 0
                if len(fields) > 2 and fields[2] != "-":
                    governors[cpu] = fields[2]
                if len(fields) > 3 and fields[3].isdigit():
                    capacity[cpu] = int(fields[3])
        elif key in ("kernel", "allowed", "auxv", "features"):
            values[key] = rest.strip()
    if not props.get("ro.product.model") and not max_khz:
        raise DeviceError(f"device {serial} answered the facts query with nothing usable "
                        f"({text.strip()[:120]!r}); is it an Android device?")
    hwcap2 = auxv_hwcap2(values.get("auxv", ""))
    feats = cpu_features("Features: " + values.get("features", ""))
    if hwcap2 is not None:
        sme, sme2, source = bool(hwcap2 & HWCAP2_SME), bool(hwcap2 & HWCAP2_SME2), "auxv"
    elif feats:
        sme, sme2, source = "sme" in feats, "sme2" in feats, "cpuinfo"
    else:
        sme = sme2 = None
        source = "unknown"
    soc = " ".join(filter(None, [props.get("ro.soc.manufacturer"), props.get("ro.soc.model")]))
    cpu = soc or props.get("ro.board.platform") or props.get("ro.hardware") or "unknown"
    known = {c: k for c, k in max_khz.items() if k > 0}
    gov_set = sorted(set(governors.values()))
    extra: dict = {
        "manufacturer": props.get("ro.product.manufacturer", ""),
        "board_platform": props.get("ro.board.platform", ""),
        "hardware": props.get("ro.hardware", ""),
        "fingerprint": props.get("ro.build.fingerprint", ""),
        "sdk": int(props["ro.build.version.sdk"]) if props.get("ro.build.version.sdk",
                                                               "").isdigit() else None,
        "cpu_max_khz": {str(c): k for c, k in sorted(known.items())},
        "clusters": clusters(known, capacity),
        "big_cores": fastest_cpus(known, 1) if known else [],
        "governor": gov_set[0] if len(gov_set) == 1 else {str(c): g for c, g in
                                                          sorted(governors.items())},
        "cpus_allowed": parse_cpu_list(values.get("allowed", "")),
        "thermal_c": parse_thermal(text),
        "sme_source": source,
    }
    if hwcap2 is not None:
        extra["hwcap2"] = hex(hwcap2)
    if props.get(EMULATOR_PROP):          # its timings say nothing about speed
        extra["emulator"] = props[EMULATOR_PROP]
    release, sdk = props.get("ro.build.version.release", ""), props.get("ro.build.version.sdk", "")
    return DeviceFacts(kind=ANDROID.name, serial=serial, model=props.get("ro.product.model") or "",
                       cpu=cpu, abi=props.get("ro.product.cpu.abi", ""),
                       os=f"Android {release} (SDK {sdk})".strip(),
                       kernel=values.get("kernel", ""), cores=len(max_khz), sme=sme, sme2=sme2,
                       executorch=package_version("executorch"), extra=extra,
                       emulated=bool(props.get(EMULATOR_PROP)),
                       target=props.get(TARGET_PROP) or "")
