"""The emulated-target tooling without building or downloading anything: finding QEMU (with
SME2) and the cross compiler, the aarch64 wheel cache, what setup would run, cache keys."""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import pytest

from pytest_sme2.cli import main
from pytest_sme2.emulation import EmulationError, tools, wheel
from pytest_sme2.errors import Sme2Error
from pytest_sme2.provision import apt, qemu
from pytest_sme2.runners.native import CrossBuild, Toolchain, cache_key, cross_cache_key
from pytest_sme2.device_programs import parse_probe
from pytest_sme2.device_programs import build as helpers

SETUP = "`pytest-sme2 setup qemu`"


def _fake_qemu(path: Path, version: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho 'qemu-aarch64 version {version} (Debian 1:{version}+ds-1)'\n"
                    "echo 'Copyright (c) 2003-2026 Fabrice Bellard and the QEMU Project'\n")
    path.chmod(0o755)
    return path


def _one_line(err: pytest.ExceptionInfo) -> str:
    msg = str(err.value)
    assert "\n" not in msg and isinstance(err.value, Sme2Error)
    return msg


@pytest.fixture
def sysroot(tmp_path) -> Path:
    root = tmp_path / "sysroot"
    (root / "lib").mkdir(parents=True)
    (root / "lib" / "ld-linux-aarch64.so.1").write_bytes(b"\x7fELF")
    return root


@pytest.fixture
def bare_host(tmp_path, monkeypatch) -> Path:
    """No QEMU anywhere, empty caches, a PATH with nothing on it."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(tools.QEMU_ENV, raising=False)
    monkeypatch.delenv(tools.SYSROOT_ENV, raising=False)
    return empty


# --- QEMU ---------------------------------------------------------------------------------

@pytest.mark.parametrize("text,version,sme2", [
    ("qemu-aarch64 version 11.1.3 (Debian 1:11.1.3+ds-1~bpo13+1)\nCopyright", "11.1.3", True),
    ("qemu-aarch64 version 10.0.2 (Debian 1:10.0.2+ds-1~bpo12+1)", "10.0.2", False),
    ("qemu-aarch64 version 7.2.0 (Debian 1:7.2+dfsg-7+deb12u18)", "7.2.0", False),
    ("qemu-aarch64 version 12.0.50 (v12.0.0-123-gdeadbeef)", "12.0.50", True),
    ("qemu-aarch64 version 11.0", "11.0", True),
])
def test_qemu_version_parsing(text, version, sme2):
    assert tools.parse_qemu_version(text) == version
    assert tools.has_sme2(version) is sme2


def test_unparseable_version():
    assert tools.parse_qemu_version("qemu-aarch64: unknown option") is None


def test_qemu_10_is_refused_saying_sme2_needs_11(tmp_path, bare_host, monkeypatch, sysroot):
    monkeypatch.setenv(tools.QEMU_ENV, str(_fake_qemu(tmp_path / "q10", "10.0.2")))
    monkeypatch.setenv(tools.SYSROOT_ENV, str(sysroot))
    with pytest.raises(EmulationError) as err:
        tools.find_qemu()
    msg = _one_line(err)
    assert "10.0.2" in msg and "SME2 needs QEMU >= 11" in msg and SETUP in msg


def test_no_qemu_anywhere(bare_host, tmp_path):
    with pytest.raises(EmulationError) as err:
        tools.find_qemu()
    msg = _one_line(err)
    assert "no QEMU user mode found" in msg and "qemu-aarch64" in msg
    assert str(tmp_path / "cache" / "pytest-sme2" / "qemu") in msg and SETUP in msg


def test_env_pointing_to_nothing_never_falls_back(bare_host, tmp_path, monkeypatch):
    _fake_qemu(bare_host / "qemu-aarch64", "11.1.3")       # a good one on PATH is not used
    monkeypatch.setenv(tools.QEMU_ENV, str(tmp_path / "nope" / "qemu-aarch64"))
    with pytest.raises(EmulationError) as err:
        tools.find_qemu()
    msg = _one_line(err)
    assert f"{tools.QEMU_ENV}={tmp_path / 'nope' / 'qemu-aarch64'}: no such executable" in msg
    assert SETUP in msg


def test_cache_is_searched_before_path_newest_first(bare_host, tmp_path, monkeypatch, sysroot):
    monkeypatch.setenv(tools.SYSROOT_ENV, str(sysroot))
    _fake_qemu(bare_host / "qemu-aarch64", "7.2.0")
    cache = tmp_path / "cache" / "pytest-sme2" / "qemu"
    _fake_qemu(cache / "11.0.0" / "usr" / "bin" / "qemu-aarch64", "11.0.0")
    newest = _fake_qemu(cache / "11.1.3" / "usr" / "bin" / "qemu-aarch64", "11.1.3")
    found = tools.find_qemu()
    assert (found.qemu, found.version, found.sysroot) == (newest, "11.1.3", sysroot)


def test_path_qemu_without_sme2_is_refused(bare_host, sysroot, monkeypatch):
    monkeypatch.setenv(tools.SYSROOT_ENV, str(sysroot))
    _fake_qemu(bare_host / "qemu-aarch64", "7.2.0")
    with pytest.raises(EmulationError) as err:
        tools.find_qemu()
    assert "qemu-aarch64 7.2.0" in _one_line(err) and SETUP in str(err.value)


def test_missing_sysroot(tmp_path, bare_host, monkeypatch):
    monkeypatch.setenv(tools.QEMU_ENV, str(_fake_qemu(tmp_path / "q", "11.1.3")))
    monkeypatch.setenv(tools.SYSROOT_ENV, str(tmp_path / "no-sysroot"))
    with pytest.raises(EmulationError) as err:
        tools.find_qemu()
    msg = _one_line(err)
    assert "ld-linux-aarch64.so.1" in msg and SETUP in msg


def test_guest_command_keeps_the_environment_in_the_guest(sysroot):
    q = tools.QemuTools(Path("/q/qemu-aarch64"), "11.1.3", sysroot)
    assert q.command(["/b/probe", "-x"], env={"LD_PRELOAD": "/m.so"}) == [
        "/q/qemu-aarch64", "-L", str(sysroot), "-cpu", "max", "-E", "LD_PRELOAD=/m.so",
        "/b/probe", "-x"]
    assert q.command(["/b/probe"], cpu="max,sme=off")[4] == "max,sme=off"


def test_a_value_with_a_comma_goes_through_qemus_environment_not_e(sysroot):
    """QEMU splits each -E at its commas (no escape): ``-E MAPS=out/q.native,sme2=off.maps.txt``
    reached the guest as MAPS=out/q.native and a variable named sme2 (issue 32, item 4)."""
    q = tools.QemuTools(Path("/q/qemu-aarch64"), "11.1.3", sysroot)
    odd = "/o/q.native,sme2=off.maps.txt"
    with pytest.raises(EmulationError, match="splits at commas"):
        q.command(["/b/r"], env={"PYTEST_SME2_MAPS_OUT": odd})
    via_e, inherited = tools.guest_env({"LD_PRELOAD": "/c/p.so", "PYTEST_SME2_MAPS_OUT": odd,
                                        "PYTEST_SME2_SAMPLE_OUT": "/o/a b=c'd\"%d.txt"})
    assert via_e == {"LD_PRELOAD": "/c/p.so", "PYTEST_SME2_SAMPLE_OUT": "/o/a b=c'd\"%d.txt"}
    assert inherited == {"PYTEST_SME2_MAPS_OUT": odd}
    # Spaces, '=', quotes and '%' travel through -E unchanged (argv, no shell).
    assert q.command(["/b/r"], env=via_e)[5:] == [
        "-E", "LD_PRELOAD=/c/p.so", "-E", "PYTEST_SME2_SAMPLE_OUT=/o/a b=c'd\"%d.txt", "/b/r"]
    # The loader's own variables must never reach QEMU itself: refused, naming the path.
    with pytest.raises(EmulationError) as err:
        tools.guest_env({"LD_PRELOAD": "/home/a,b/.cache/p.so"})
    assert _one_line(err) == ("/home/a,b/.cache/p.so: LD_PRELOAD for the emulated runner cannot "
                              "hold a comma (QEMU's -E splits at commas); move it to a folder "
                              "whose path has none (for the preload library: set "
                              "XDG_CACHE_HOME)")


def test_no_cross_compiler(bare_host):
    with pytest.raises(EmulationError) as err:
        tools.find_cross_compiler()
    msg = _one_line(err)
    assert "aarch64-linux-gnu-gcc" in msg and "g++-aarch64-linux-gnu" in msg and SETUP in msg


# --- the aarch64 wheel ----------------------------------------------------------------------

def _entry(version: str) -> Path:
    return wheel.entry_dir(version)


def _fake_wheel(folder: Path, version: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"executorch-{version}-cp311-cp311-manylinux_2_28_aarch64.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"executorch-{version}.dist-info/METADATA",
                    f"Metadata-Version: 2.1\nName: executorch\nVersion: {version}\n")
        zf.writestr("executorch/lib/cmake/executorch/executorch-config.cmake", "# cfg\n")
        zf.writestr("executorch/lib/libexecutorch.so", b"\x7fELF")
        zf.writestr("executorch/include/executorch/x.h", "// h\n")
        zf.writestr("executorch/exir/big_python_module.py", "# not kept\n")
    return path


def test_cached_wheel_of_another_version_is_refused(bare_host):
    entry = _entry("1.5.1")
    (entry / "executorch" / "lib" / "cmake" / "executorch").mkdir(parents=True)
    (entry / "executorch" / wheel.CMAKE_CONFIG).write_text("# cfg\n")
    (entry / wheel.MANIFEST).write_text(json.dumps({"version": "1.4.0"}))
    with pytest.raises(EmulationError) as err:
        wheel.cached_executorch_dir("1.5.1")
    msg = _one_line(err)
    assert "executorch 1.4.0, not 1.5.1" in msg and SETUP in msg


def test_a_refused_cache_entry_is_replaced_by_the_right_wheel(bare_host, monkeypatch):
    entry = _entry("1.5.1")
    entry.mkdir(parents=True)
    (entry / wheel.MANIFEST).write_text(json.dumps({"version": "1.4.0"}))
    monkeypatch.setattr(wheel, "_download", lambda version, dest: _fake_wheel(dest, version))
    said: list[str] = []
    folder = wheel.target_executorch_dir("1.5.1", progress=said.append)
    assert folder == entry / "executorch"
    assert (folder / wheel.CMAKE_CONFIG).is_file() and (folder / "include").is_dir()
    assert not (folder / "exir").exists()                  # only the C++ parts are kept
    assert json.loads((entry / wheel.MANIFEST).read_text())["version"] == "1.5.1"
    assert any("1.4.0, not 1.5.1" in s for s in said)
    assert wheel.cached_executorch_dir("1.5.1") == folder  # now a hit, no download
    monkeypatch.setattr(wheel, "_download", lambda *a: pytest.fail("downloaded on a hit"))
    assert wheel.target_executorch_dir("1.5.1") == folder


def test_a_wheel_that_is_another_version_is_never_unpacked(bare_host, monkeypatch):
    monkeypatch.setattr(wheel, "_download", lambda version, dest: _fake_wheel(dest, "1.4.0"))
    with pytest.raises(EmulationError) as err:
        wheel.target_executorch_dir("1.5.1")
    assert "is executorch 1.4.0, not 1.5.1" in _one_line(err)
    assert not _entry("1.5.1").exists()


def test_download_failure_is_one_line_naming_the_version(bare_host, monkeypatch):
    script = ("import sys; sys.stderr.write('Looking in indexes\\nERROR: No matching "
              "distribution found for executorch==9.9.9\\n'); sys.exit(1)")
    monkeypatch.setattr(wheel, "download_command", lambda v, d: [sys.executable, "-c", script])
    with pytest.raises(EmulationError) as err:
        wheel.target_executorch_dir("9.9.9")
    msg = _one_line(err)
    assert "aarch64 executorch 9.9.9 wheel" in msg and "No matching distribution" in msg
    assert SETUP in msg


def test_download_command_asks_pip_for_the_aarch64_wheel():
    argv = wheel.download_command("1.5.1", Path("/d"))
    assert argv[:4] == [sys.executable, "-m", "pip", "download"]
    assert {"--no-deps", "--only-binary=:all:", "executorch==1.5.1"} <= set(argv)
    assert argv[argv.index("--platform") + 1] == "manylinux_2_28_aarch64"


# --- cache keys -----------------------------------------------------------------------------

def _toolchain(cxx: str = "/usr/bin/g++-12", version: str = "g++ (Debian 12.2.0-14) 12.2.0"):
    return Toolchain("/usr/bin/cmake", cxx, version, "/usr/bin/ninja")


def test_cache_keys_differ_between_host_and_aarch64():
    tc = _toolchain()
    cross = CrossBuild("aarch64-linux-gnu", tc, "/usr/bin/gcc-12", Path("/w/executorch"), "1.5.1")
    assert cache_key(tc) != cross_cache_key(cross)
    same = CrossBuild("aarch64-linux-gnu", _toolchain(), "/usr/bin/gcc-12", Path("/w/executorch"),
                      "1.5.1")
    assert cross_cache_key(cross) == cross_cache_key(same)


@pytest.mark.parametrize("change", [
    {"executorch_version": "1.6.0"},
    {"executorch_dir": Path("/elsewhere/executorch")},
    {"toolchain": _toolchain(version="aarch64-linux-gnu-g++-13 (Debian 13.1) 13.1.0")},
])
def test_cross_key_follows_wheel_and_compiler(change):
    base = dict(target="aarch64-linux-gnu", toolchain=_toolchain(), cc="/usr/bin/gcc-12",
                executorch_dir=Path("/w/executorch"), executorch_version="1.5.1")
    assert cross_cache_key(CrossBuild(**base)) != cross_cache_key(CrossBuild(**{**base,
                                                                               **change}))


# --- target helpers -------------------------------------------------------------------------

def test_helper_commands():
    cmds = helpers.helper_commands("/cc", Path("/out"), Path("/src"))
    assert cmds[helpers.PRELOAD_LIB] == ["/cc", "-O2", "-shared", "-fPIC", "-o",
                                      "/out/libpytest_sme2_preload.so", "/src/preload.c",
                                      "-ldl"]
    assert cmds[helpers.PROBE] == ["/cc", "-O2", "-o", "/out/sme2_probe", "/src/sme2_probe.c"]


def test_android_without_ndk_names_the_variable(monkeypatch):
    for name in helpers.NDK_ENVS:
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(EmulationError) as err:
        helpers.build_target_helpers("android-arm64")
    assert "ANDROID_NDK" in _one_line(err)


def test_android_uses_the_ndk_clang_for_api_28(tmp_path, monkeypatch):
    ndk = tmp_path / "ndk"
    clang = helpers.android_clang(ndk, host_tag="linux-x86_64")
    assert clang == (ndk / "toolchains/llvm/prebuilt/linux-x86_64/bin/"
                     "aarch64-linux-android28-clang")
    monkeypatch.delenv("ANDROID_NDK", raising=False)
    monkeypatch.setenv("ANDROID_NDK_HOME", str(ndk))
    with pytest.raises(EmulationError) as err:
        helpers.find_target_cc("android-arm64")
    assert "aarch64-linux-android28-clang" in _one_line(err)
    clang = helpers.android_clang(ndk)
    clang.parent.mkdir(parents=True)
    clang.write_text("#!/bin/sh\n")
    clang.chmod(0o755)
    assert helpers.find_target_cc("android-arm64") == str(clang)
    assert helpers.helper_commands(str(clang), Path("/o"))[helpers.PROBE][0] == str(clang)


def test_helper_keys_follow_target_and_compiler():
    a = helpers.helpers_cache_key("aarch64-linux-gnu", "/cc", "gcc 12.2.0")
    assert a == helpers.helpers_cache_key("aarch64-linux-gnu", "/cc", "gcc 12.2.0")
    assert a != helpers.helpers_cache_key("android-arm64", "/cc", "gcc 12.2.0")
    assert a != helpers.helpers_cache_key("aarch64-linux-gnu", "/cc", "gcc 13.1.0")


def test_unknown_helper_target():
    with pytest.raises(EmulationError) as err:
        helpers.find_target_cc("riscv64")
    assert "aarch64-linux-gnu, android-arm64" in _one_line(err)


def test_parse_probe():
    facts = parse_probe("machine aarch64\nkernel 6.1.0\nhwcap 0xb01feffffffb\n"
                        "hwcap2 0x7fffbff47fc77fff\ncpus 2\npagesize 4096\ngarbage\n")
    assert facts == {"machine": "aarch64", "kernel": "6.1.0", "hwcap": 0xb01feffffffb,
                     "hwcap2": 0x7fffbff47fc77fff, "cpus": 2, "pagesize": 4096}
    assert facts["hwcap2"] & (1 << 37)


# --- setup ----------------------------------------------------------------------------------

@pytest.fixture
def fresh_debian(bare_host, tmp_path, monkeypatch):
    """A root Debian host with nothing provisioned; apt files redirected to tmp_path."""
    monkeypatch.setattr(qemu, "SOURCES_FILE", tmp_path / "apt" / "sources")
    monkeypatch.setattr(qemu, "PIN_FILE", tmp_path / "apt" / "pin")
    monkeypatch.setattr(apt, "is_root", lambda: True)
    monkeypatch.setattr(apt, "not_debian_reason", lambda suite: None)
    return tmp_path


def test_dry_run_lists_the_commands_and_does_nothing(fresh_debian):
    lines: list[str] = []
    assert qemu.run_setup(dry_run=True, out=lines.append) == 0
    text = "\n".join(lines)
    for expected in ("Suites: trixie-backports", "Pin: release n=trixie-backports",
                     "Pin-Priority: 1", "    apt-get update",
                     "apt-get download qemu-user/trixie-backports", "dpkg-deb --fsys-tarfile",
                     str(fresh_debian / "cache" / "pytest-sme2" / "qemu"),
                     "    apt-get install -y g++-aarch64-linux-gnu",
                     "pip download", "manylinux_2_28_aarch64",
                     "native runner for aarch64-linux-gnu", "would build it",
                     "guest sees SME2"):
        assert expected in text, expected
    assert "sudo" not in text and "debian.sources" not in text
    assert not (fresh_debian / "apt").exists()
    assert not (fresh_debian / "cache").exists()


def test_not_root_prints_sudo_commands_and_exits_2(fresh_debian, monkeypatch):
    monkeypatch.setattr(apt, "is_root", lambda: False)
    lines: list[str] = []
    assert qemu.run_setup(dry_run=False, out=lines.append) == 2
    assert "    sudo apt-get update" in lines
    assert any(ln.startswith("    sudo tee ") for ln in lines)    # a redirect would not be root
    assert any(ln.startswith("    cd ") and "apt-get download" in ln for ln in lines)
    assert lines[-1].startswith("pytest-sme2: cannot provision here: not root")
    assert SETUP in lines[-1]
    assert not (fresh_debian / "apt").exists()


def test_not_debian_says_what_is_needed_and_exits_2(fresh_debian, monkeypatch):
    monkeypatch.setattr(apt, "not_debian_reason",
                        lambda suite: "this is not Debian (no x)")
    lines: list[str] = []
    assert qemu.run_setup(dry_run=False, out=lines.append) == 2
    text = "\n".join(lines)
    assert "PYTEST_SME2_QEMU" in text and "PYTEST_SME2_SYSROOT" in text
    assert "apt-get" not in text.replace("apt-get download", "")  # no Debian-only commands
    assert lines[-1].startswith("pytest-sme2: cannot provision here: this is not Debian")


def test_apt_source_check_needs_suite_and_pin(fresh_debian):
    assert qemu._apt_source_there() is None
    qemu._write_apt_source()
    assert qemu._apt_source_there()
    qemu.PIN_FILE.write_text("Package: *\nPin: release n=trixie-backports\n"
                                  "Pin-Priority: 500\n")
    assert qemu._apt_source_there() is None          # a pin that upgrades is not ours


def test_cli_setup_dry_run(fresh_debian, capsys):
    assert main(["setup", "qemu", "--dry-run"]) == 0
    assert "apt-get download qemu-user/trixie-backports" in capsys.readouterr().out


def test_printed_apt_source_commands_paste_into_a_shell(fresh_debian):
    import subprocess

    lines: list[str] = []
    qemu.run_setup(dry_run=True, out=lines.append)
    start = next(i for i, ln in enumerate(lines) if ln.startswith("[1/7]"))
    end = next(i for i, ln in enumerate(lines) if ln.startswith("[2/7]"))
    qemu.SOURCES_FILE.parent.mkdir()
    subprocess.run(["/bin/bash", "-euc", "\n".join(lines[start + 1:end])], check=True,
                   env={"PATH": "/usr/bin:/bin"})
    assert qemu.SOURCES_FILE.read_text() == qemu.SOURCES_TEXT
    assert qemu.PIN_FILE.read_text() == qemu.PIN_TEXT
    assert qemu._apt_source_there()
