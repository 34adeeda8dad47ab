"""The fake phone's files: a folder standing for its ``/`` with crafted CPU, auxv and thermal
files, fake ``getprop``/``uname``/``taskset``/``dumpsys``, and for an aarch64 phone the
``fake-exec`` that runs aarch64 ELF programs under QEMU user mode (binfmt_misc by hand).

An aarch64 phone hands its programs no glibc sysroot (no ``-L``): as on a phone, a glibc program
runs only when it brings its own loader (:mod:`pytest_sme2.runners.native.bundle`). ``sysroot``
serves only the fake's own host-side look at the emulated CPU (running the probe once)."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

GUEST_PRELOAD = "FAKE_GUEST_LD_PRELOAD"
HWCAP2_SME, HWCAP2_SME2 = 1 << 23, 1 << 37
AT_NULL, AT_PAGESZ, AT_HWCAP, AT_HWCAP2 = 0, 6, 16, 26
# /proc/cpuinfo feature names of the AT_HWCAP and AT_HWCAP2 bits, in bit order (Linux
# arch/arm64/kernel/cpuinfo.c): the aarch64 fake derives its Features line from the emulated CPU.
HWCAP_NAMES = ("fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm "
               "jscvt fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc "
               "flagm ssbs sb paca pacg").split()
HWCAP2_NAMES = ("dcpodp sve2 sveaes svepmull svebitperm svesha3 svesm4 flagm2 frint svei8mm "
                "svef32mm svef64mm svebf16 i8mm bf16 dgh rng bti mte ecv afp rpres mte3 sme "
                "smei16i64 smef64f64 smei8i32 smef16f32 smeb16f32 smef32f32 smefa64 wfxt ebf16 "
                "sveebf16 cssc rprfm sve2p1 sme2 sme2p1 smei16i32 smebi32i32 smeb16b16 smef16f16 "
                "mops hbc sveb16b16 lrcpc3 lse128 fpmr lut faminmax f8cvt f8fma f8dp4 f8dp2 "
                "f8e4m3 f8e5m2 smelutv2 smef8f16 smef8f32 smesf8fma smesf8dp4 smesf8dp2 "
                "poe").split()


def default_props(sme2: bool) -> dict[str, str]:
    soc = "MT6993" if sme2 else "SM8650"
    return {
        "ro.product.name": "fakephone", "ro.product.device": "fake",
        "ro.product.model": "Fake SME2 Phone" if sme2 else "Fake Phone",
        "ro.product.manufacturer": "pytest-sme2",
        "ro.soc.manufacturer": "Mediatek" if sme2 else "QTI", "ro.soc.model": soc,
        "ro.board.platform": "mt6993" if sme2 else "pineapple",
        "ro.hardware": "mt6993" if sme2 else "qcom",
        "ro.product.cpu.abi": "arm64-v8a", "ro.product.cpu.abilist": "arm64-v8a",
        "ro.build.version.release": "16", "ro.build.version.sdk": "36",
        "ro.build.fingerprint": "pytest/fakephone/fake:16/BP2A.250605.031/1:user/release-keys",
    }


@dataclass
class FakeAndroidConfig:
    sme2: bool = True
    # CPU layout: (cpu count, max kHz) per cluster, little to big.
    clusters: tuple[tuple[int, int], ...] = ((4, 2000000), (3, 3250000), (1, 4210000))
    governor: str = "schedutil"
    # The fake kernel applies taskset's mask (its /proc/<pid>/task/*/status say so); False: it
    # ignores it, as llama.cpp's -C was on Android (#26836): the threads keep every CPU.
    taskset_applies: bool = True
    thermal: tuple[tuple[str, int], ...] = (("cpu-0-0", 41200), ("cpu-1-0", 43500),
                                            ("battery", 30100))
    # Cooling devices (type, cur_state): a CPU one above 0 is throttling
    # (pytest_sme2.devices.thermal).
    cooling: tuple[tuple[str, int], ...] = (("thermal-cpufreq-0", 0), ("thermal-cpufreq-4", 0))
    # `dumpsys thermalservice`'s "Thermal Status" (None: the phone has no dumpsys).
    thermal_status: int | None = None
    # Thermal readings that change while the phone is watched: the n-th shell command that
    # reads /sys/class/thermal sees the n-th value of each sequence (the last one stays).
    # Keys: a zone type of ``thermal`` (millidegrees), "cooling:<type>" (its cur_state),
    # "status" (the thermal status; needs ``thermal_status`` set).
    thermal_steps: dict[str, tuple[int, ...]] = field(default_factory=dict)
    kernel: str = "6.6.50-android15-8-g0123456789ab"
    props: dict[str, str] = field(default_factory=dict)   # overrides of default_props()
    unauthorized: bool = False      # answer CNXN with AUTH and never accept the key
    silent: bool = False            # accept TCP but never answer CNXN
    drop_on: str | None = None      # regex: drop the TCP connection once such a command starts
    drop_after_s: float = 0.2
    # regex: when the ``vanish_at``-th command matching ``vanish_on`` arrives, the phone is gone
    # for good (stops listening, drops its connections; that command never runs), as a phone
    # unplugged mid-session.
    vanish_on: str | None = None
    vanish_at: int = 2
    # regex: commands matching it first wait this long, as work the phone's own CPU does (a
    # stand-in for a real phone's benchmark time that costs this machine nothing)
    busy_on: str | None = None
    busy_s: float = 0.0
    fail_push: str | None = None    # regex on device paths: SEND answers FAIL
    free_kb: int | None = None      # what df says is free (None: the host's df of the sandbox)
    serial_no: str = "FAKE0001"
    # "host": pushed programs are host programs. "aarch64": aarch64 ELF programs run under QEMU
    # (qemu, sysroot and probe needed; sme2 is then ignored: the emulated CPU decides).
    arch: str = "host"
    qemu: Path | None = None        # qemu-aarch64, >= 11 for SME2
    # An aarch64 glibc (loader and libraries): only to run the probe on the host when the phone
    # is built. Never handed to the phone's programs.
    sysroot: Path | None = None
    qemu_cpu: str = "max"
    probe: Path | None = None       # aarch64 sme2_probe: the emulated CPU's hwcaps
    trace_dir: Path | None = None   # aarch64: each program's QEMU in_asm log and maps file here
    # aarch64: AT_HWCAP2 bits the phone's kernel denies every program (its auxv, its cpuinfo
    # and what getauxval answers in a program that preloads pytest-sme2's library, as every
    # run of the device does): the SME2 family for an SME1-only phone (the 2026 Snapdragon
    # flagship's class). The code of a hidden feature still runs under QEMU, as a dispatch bug
    # would make it run on real silicon (where it faults).
    hidden_hwcap2: int = 0



# -- the sandbox -----------------------------------------------------------------------------

def _cpu_features(sme2: bool) -> str:
    base = ("fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm "
            "jscvt fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc "
            "flagm ssbs sb paca pacg dcpodp sve2 sveaes svepmull svebitperm svesha3 svesm4 "
            "flagm2 frint svei8mm svebf16 i8mm bf16 dgh bti")
    return base + (" sme smei16i64 smef64f64 smei8i32 smef16f32 smeb16f32 smef32f32 smefa64 "
                   "sme2" if sme2 else "")


def hwcap_features(hwcap: int, hwcap2: int) -> str:
    """The cpuinfo ``Features`` words of AT_HWCAP/AT_HWCAP2 values (named bits only)."""
    return " ".join([n for b, n in enumerate(HWCAP_NAMES) if hwcap >> b & 1]
                    + [n for b, n in enumerate(HWCAP2_NAMES) if hwcap2 >> b & 1])


def crafted_auxv(sme2: bool, hwcaps: tuple[int, int] | None = None) -> bytes:
    """An arm64 auxiliary vector: (type, value) u64 pairs ending with AT_NULL. ``hwcaps``:
    (AT_HWCAP, AT_HWCAP2) as read on an emulated CPU; else made up from ``sme2``."""
    if hwcaps is None:
        hwcap2 = (HWCAP2_SME | HWCAP2_SME2 | (1 << 1)) if sme2 else (1 << 1)   # bit 1: SVE2
        hwcaps = (0xEFFFFFFF, hwcap2)
    pairs = [(33, 0x7FFF0000), (AT_HWCAP, hwcaps[0]), (AT_PAGESZ, 4096), (AT_HWCAP2, hwcaps[1]),
             (AT_NULL, 0)]
    return b"".join(struct.pack("<QQ", k, v) for k, v in pairs)


@dataclass(frozen=True)
class EmulatedCpu:
    """What the aarch64 probe saw under QEMU: the fake phone's CPU."""
    hwcap: int
    hwcap2: int
    qemu_version: str


def emulated_cpu(cfg: FakeAndroidConfig) -> EmulatedCpu:
    """Run the aarch64 probe under the phone's QEMU once; its hwcaps are the phone's."""
    for what in ("qemu", "sysroot", "probe"):
        if getattr(cfg, what) is None or not Path(getattr(cfg, what)).exists():
            raise ValueError(f"an aarch64 fake phone needs {what}= (got {getattr(cfg, what)})")
    libs = Path(cfg.sysroot) / "lib"     # the probe started through the loader, as on a phone
    argv = [str(cfg.qemu), "-cpu", cfg.qemu_cpu, str(libs / "ld-linux-aarch64.so.1"),
            "--library-path", str(libs), str(cfg.probe)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    seen = dict(ln.split(" ", 1) for ln in proc.stdout.splitlines() if " " in ln)
    if proc.returncode != 0 or "hwcap2" not in seen:
        raise RuntimeError(f"the probe failed under QEMU ({' '.join(argv)}): "
                           f"{proc.stderr.strip()[-300:]}")
    version = subprocess.run([str(cfg.qemu), "--version"], capture_output=True, text=True,
                             timeout=30).stdout
    m = re.search(r"version (\d+(?:\.\d+)*)", version)
    return EmulatedCpu(int(seen["hwcap"], 0), int(seen["hwcap2"], 0), m.group(1) if m else "?")


def _target_props(cfg: FakeAndroidConfig, cpu: EmulatedCpu | None) -> dict[str, str]:
    """What the fake phone runs, as properties only pytest-sme2's fakes have (a real phone runs
    bionic programs and has neither): the native-runner target and, if emulated, the emulator."""
    if cpu is None:
        return {"ro.pytest_sme2.target": "host"}
    return {"ro.pytest_sme2.target": "aarch64-linux-gnu",
            "ro.pytest_sme2.emulator": f"QEMU {cpu.qemu_version} user mode, -cpu {cfg.qemu_cpu}",
            "ro.product.model": "Fake Arm64 Phone (QEMU)", "ro.soc.manufacturer": "QEMU",
            "ro.soc.model": cfg.qemu_cpu, "ro.board.platform": "qemu", "ro.hardware": "qemu"}


def _fake_exec(cfg: FakeAndroidConfig) -> str:
    """binfmt_misc done by hand: an aarch64 ELF program runs under QEMU, anything else as is."""
    trace = ""
    if cfg.trace_dir is not None:
        d = _sh_word(str(cfg.trace_dir))
        # The runner's own maps copy when the device asked for one (sampling), else one here.
        trace = ('run=$(date +%s%N)-$$\n'
                 'if [ -n "${PYTEST_SME2_MAPS_OUT:-}" ]; then '
                 f'echo "$PYTEST_SME2_MAPS_OUT" > {d}/run-$run.maps-path; '
                 f'set -- -d in_asm -D {d}/run-$run.log "$@"; else '
                 f'set -- -d in_asm -D {d}/run-$run.log -E PYTEST_SME2_MAPS_OUT={d}/run-$run.maps '
                 '"$@"; fi\n')
    qemu = " ".join(_sh_word(str(a)) for a in (cfg.qemu, "-cpu", cfg.qemu_cpu))
    # The kernel's hiding, on top of any mask the device asked for (QEMU hands its own
    # environment to the program; the preload library reads it at every getauxval).
    hide = (f'PYTEST_SME2_HWCAP2_CLEAR=$(printf %#x $(( ${{PYTEST_SME2_HWCAP2_CLEAR:-0}} | '
            f'{cfg.hidden_hwcap2:#x} )))\nexport PYTEST_SME2_HWCAP2_CLEAR\n'
            if cfg.hidden_hwcap2 else "")
    return ("#!/bin/sh\n# fake binfmt_misc: aarch64 ELF programs run under QEMU user mode\n"
            'case "$1" in */*) ;; *) exec "$@" ;; esac\n'
            '[ -f "$1" ] && [ "$(od -An -tx1 -N4 "$1" | tr -d \' \\n\')" = 7f454c46 ] && '
            '[ "$(od -An -tu2 -j18 -N2 "$1" | tr -d \' \\n\')" = 183 ] || exec "$@"\n'
            'if [ -n "${LD_LIBRARY_PATH+x}" ]; then '
            'set -- -E "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" "$@"; fi\n'
            f'if [ -n "${{{GUEST_PRELOAD}+x}}" ]; then '
            f'set -- -E "LD_PRELOAD=${GUEST_PRELOAD}" "$@"; fi\n'
            + trace + hide +
            f'exec env -u LD_LIBRARY_PATH -u {GUEST_PRELOAD} {qemu} "$@"\n')


def _fake_taskset(start: str, applies: bool, ncpu: int) -> str:
    """Logs the mask and runs the command unpinned on the host (it may have fewer CPUs), while
    the phone's /proc/<pid>/task/<tid>/status mirror the host's with the affinity the phone's
    kernel gave: the mask's CPUs (``taskset_applies``) or every CPU (a mask it ignored). The
    mirror lives while the process does; /proc in these scripts is the host's."""
    cpus = ('m=$((0x$1)); i=0; list=; while [ "$m" -gt 0 ]; do [ $((m & 1)) -eq 1 ] && '
            'list="$list${list:+,}$i"; m=$((m >> 1)); i=$((i + 1)); done\n') if applies \
        else f"list=0-{ncpu - 1}\n"
    mirror = ('d="$FAKE_ANDROID_ROOT/proc/$$"; pid=$$; mkdir -p "$d/task"\n'
              '(while [ -d /proc/$pid ]; do for t in /proc/$pid/task/*; do '
              'mkdir -p "$d/task/${t##*/}"; '
              'sed "s/^Cpus_allowed_list:.*/Cpus_allowed_list:\t$list/" '
              '"$t/status" > "$d/task/${t##*/}/status.part" 2>/dev/null && '
              'mv "$d/task/${t##*/}/status.part" "$d/task/${t##*/}/status"; done; sleep 0.01; '
              'done; rm -rf "$d") >/dev/null 2>&1 </dev/null &\n')
    return ("#!/bin/sh\n# fake taskset: logs the mask, runs the command unpinned, reports the "
            "affinity in the phone's /proc\n"
            'echo "$1" >> "$FAKE_ANDROID_ROOT/taskset.log"\n' + cpus + mirror
            + f'shift\nexec {start}"$@"\n')


def _fake_timeout() -> str:
    real = shutil.which("timeout", path="/usr/bin:/bin") or "timeout"
    return ("#!/bin/sh\n# fake toybox timeout: the host's, its command started through fake-exec\n"
            'opts=\nwhile :; do\n  case "$1" in\n'
            '    -k|-s) opts="$opts $1 $2"; shift 2 ;;\n    -*) opts="$opts $1"; shift ;;\n'
            '    *) break ;;\n  esac\ndone\nlimit=$1\nshift\n'
            f'exec {_sh_word(real)} $opts "$limit" "$FAKE_ANDROID_ROOT/bin/fake-exec" "$@"\n')


def _write(path: Path, text: str | bytes, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    os.chmod(path, mode)


def build_sandbox(root: Path, cfg: FakeAndroidConfig) -> dict[str, str]:
    """Lay out the phone's files; the properties its getprop answers."""
    if cfg.arch not in ("host", "aarch64"):
        raise ValueError(f"FakeAndroidConfig.arch must be 'host' or 'aarch64', not {cfg.arch!r}")
    (root / "data/local/tmp").mkdir(parents=True, exist_ok=True)
    ncpu = sum(n for n, _ in cfg.clusters)
    emulated = emulated_cpu(cfg) if cfg.arch == "aarch64" else None
    if emulated is not None:
        hwcaps: tuple[int, int] | None = (emulated.hwcap, emulated.hwcap2 & ~cfg.hidden_hwcap2)
        sme2 = bool(emulated.hwcap2 & HWCAP2_SME2)
        feats = hwcap_features(*hwcaps)
    else:
        hwcaps, sme2, feats = None, cfg.sme2, _cpu_features(cfg.sme2)
    cpuinfo = "".join(f"processor\t: {i}\nBogoMIPS\t: 26.00\nFeatures\t: {feats}\n"
                      f"CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\n"
                      f"CPU part\t: 0xd87\nCPU revision\t: 1\n\n" for i in range(ncpu))
    _write(root / "proc/cpuinfo", cpuinfo)
    _write(root / "proc/self/auxv", crafted_auxv(sme2, hwcaps))
    mask = (1 << ncpu) - 1
    _write(root / "proc/self/status", f"Name:\tsh\nState:\tR (running)\nCpus_allowed:\t{mask:x}\n"
                                      f"Cpus_allowed_list:\t0-{ncpu - 1}\n")
    cpu_dir = root / "sys/devices/system/cpu"
    _write(cpu_dir / "possible", f"0-{ncpu - 1}\n")
    _write(cpu_dir / "online", f"0-{ncpu - 1}\n")
    cpu = 0
    for count, khz in cfg.clusters:
        for _ in range(count):
            _write(cpu_dir / f"cpu{cpu}/cpufreq/cpuinfo_max_freq", f"{khz}\n")
            _write(cpu_dir / f"cpu{cpu}/cpufreq/scaling_governor", f"{cfg.governor}\n")
            # Android's sysfs capacity: 1024 for the biggest core, scaled by frequency here.
            top = max(k for _, k in cfg.clusters)
            _write(cpu_dir / f"cpu{cpu}/cpu_capacity", f"{1024 * khz // top}\n")
            cpu += 1
    for i, (kind, milli) in enumerate(cfg.thermal):
        _write(root / f"sys/class/thermal/thermal_zone{i}/type", f"{kind}\n")
        _write(root / f"sys/class/thermal/thermal_zone{i}/temp", f"{milli}\n")
    for i, (kind, state) in enumerate(cfg.cooling):
        _write(root / f"sys/class/thermal/cooling_device{i}/type", f"{kind}\n")
        _write(root / f"sys/class/thermal/cooling_device{i}/cur_state", f"{state}\n")
    if cfg.thermal_status is not None:
        set_thermal(root, cfg, "status", cfg.thermal_status)
        _write(root / "bin/dumpsys", "#!/bin/sh\n# fake dumpsys: the services' dumps as files\n"
                                     'cat "$FAKE_ANDROID_ROOT/dumpsys/$1" 2>/dev/null\n', 0o755)
    props = {**default_props(sme2), **_target_props(cfg, emulated), **cfg.props}
    cases = "".join(f"  {_sh_word(k)}) echo {_sh_word(v)} ;;\n" for k, v in props.items())
    listing = "".join(f"echo {_sh_word(f'[{k}]: [{v}]')}\n" for k, v in sorted(props.items()))
    _write(root / "bin/getprop",
           "#!/bin/sh\n# fake Android getprop\n"
           f'if [ $# -eq 0 ]; then\n{listing}exit 0\nfi\n'
           f'case "$1" in\n{cases}  *) echo "${{2:-}}" ;;\nesac\n', 0o755)
    _write(root / "bin/uname",
           "#!/bin/sh\n# fake Android uname\n"
           f'case "$1" in\n  -r) echo {_sh_word(cfg.kernel)} ;;\n  -m) echo aarch64 ;;\n'
           f'  -a) echo "Linux localhost {cfg.kernel} #1 SMP PREEMPT aarch64 Toybox" ;;\n'
           '  *) echo Linux ;;\nesac\n', 0o755)
    if cfg.free_kb is not None:
        _write_df(root, cfg.free_kb)
    # The host may have fewer CPUs than the fake phone: record the mask instead of applying it.
    start = '"$FAKE_ANDROID_ROOT/bin/fake-exec" ' if emulated is not None else ""
    _write(root / "bin/taskset", _fake_taskset(start, cfg.taskset_applies, ncpu), 0o755)
    if emulated is not None:
        _write(root / "bin/fake-exec", _fake_exec(cfg), 0o755)
        _write(root / "bin/timeout", _fake_timeout(), 0o755)
        if cfg.trace_dir is not None:
            Path(cfg.trace_dir).mkdir(parents=True, exist_ok=True)
    return props


def _write_df(root: Path, free_kb: int) -> None:
    """A df that says ``free_kb`` KiB are available (toybox's ``df -k`` columns)."""
    _write(root / "bin/df", "#!/bin/sh\n# fake toybox df: a phone with little room\n"
           "echo 'Filesystem 1K-blocks Used Available Use% Mounted on'\n"
           f"echo '/dev/block/dm-5 {free_kb * 4} {free_kb * 3} {free_kb} 75% /data'\n", 0o755)


def set_thermal(root: Path, cfg: FakeAndroidConfig, key: str, value: int) -> None:
    """Set one thermal reading of a built phone (``FakeAndroidConfig.thermal_steps`` keys)."""
    if key == "status":
        # The shape of `dumpsys thermalservice` (Android 14); the temperatures are the
        # zones' (tests/unit/devices/test_thermal.py parses a dump with HAL temperatures).
        _write(root / "dumpsys/thermalservice",
               f"IsStatusOverride: false\nThermal Status: {value}\nCached temperatures:\n"
               "HAL Ready: true\nCurrent temperatures from HAL:\n"
               "Current cooling devices from HAL:\n")
        return
    kinds = [k for k, _ in cfg.cooling] if key.startswith("cooling:") else \
        [k for k, _ in cfg.thermal]
    name = key.removeprefix("cooling:")
    if name not in kinds:
        raise ValueError(f"thermal_steps key {key!r} names no zone or cooling device")
    path = (f"cooling_device{kinds.index(name)}/cur_state" if key.startswith("cooling:")
            else f"thermal_zone{kinds.index(name)}/temp")
    _write(root / "sys/class/thermal" / path, f"{value}\n")


def _sh_word(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"
