"""A phone run's pure parts: the bundled loader's command line, which failures are the loader's,
the mask that must be seen to apply, the runner cache's pruning, and which benchmarks get an
evidence process."""

from __future__ import annotations

import signal
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_sme2.measure.process import wants_sample
from pytest_sme2.devices.android import loader_failed
from pytest_sme2.devices.android.staging import (CACHE_DIR, KEEP_MODELS, KEEP_RUNNERS, Push,
                                                 check_inside, check_room, free_bytes,
                                                 free_kb_command, prune_command, runner_folder)
from pytest_sme2.devices.base import DeviceBase, DeviceError
from pytest_sme2.device_programs.hwcaps import mask_bits, mask_problem
from pytest_sme2.runners.base import RunnerBase
from pytest_sme2.runners.native.bundle import GlibcBundle, is_glibc_program


def test_the_bundle_starts_the_runner_through_its_loader_with_the_preload() -> None:
    b = GlibcBundle((Path("/h/sme2_runner"), Path("/s/ld-linux-aarch64.so.1"),
                     Path("/s/libc.so.6")), preload=Path("/h/libpytest_sme2_preload.so"))
    d = "/data/local/tmp/pytest-sme2-cache/runner-0123456789abcdef"
    assert b.argv(d, ["/h/sme2_runner", "--model_path", "m.pte"]) == [
        f"{d}/ld-linux-aarch64.so.1", "--library-path", d, "--preload",
        f"{d}/libpytest_sme2_preload.so", f"{d}/sme2_runner", "--model_path", "m.pte"]
    assert GlibcBundle((Path("r"),)).argv("/x", ["r"]) == [
        "/x/ld-linux-aarch64.so.1", "--library-path", "/x", "/x/r"]


def test_a_script_is_not_a_glibc_program(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\n")
    assert not is_glibc_program(script)


@pytest.mark.parametrize("rc, stderr, loader", [
    (127, "", True),
    (126, "", True),
    (128 + signal.SIGSYS, "", True),                       # a seccomp filter killed it
    (1, "/data/x/ld-linux-aarch64.so.1: Permission denied", True),   # SELinux noexec
    (1, "FATAL: kernel too old", True),
    (1, "./sme2_runner: error while loading shared libraries: libz.so.1: cannot open", True),
    (1, "runner: cannot open /data/m.pte: Permission denied", False),   # the runner's own
    (1, "Error 0x12 loading method forward", False),
    (128 + signal.SIGSEGV, "", False),
])
def test_loader_failures_are_told_from_the_runners_own(rc: int, stderr: str,
                                                       loader: bool) -> None:
    assert loader_failed(rc, stderr) is loader


def test_the_mask_must_be_seen_to_apply() -> None:
    clear = mask_bits("sme")
    ok = ("pytest-sme2 preload: AT_HWCAP2 0x7fffbff47fc77fff -> 0x1ffb81400477fff "
          "(3 getauxval calls)")
    assert mask_problem(ok, clear) is None
    assert "did not report" in mask_problem("", clear)
    no_calls = "pytest-sme2 preload: AT_HWCAP2 0 -> 0 (0 getauxval calls)"
    assert "reads its CPU features another way" in mask_problem(no_calls, clear)
    still = ("pytest-sme2 preload: AT_HWCAP2 0x7fffbff47fc77fff -> 0x7fffbff47fc77fff "
             "(2 getauxval calls)")
    assert "saw AT_HWCAP2 0x7fffbff47fc77fff" in mask_problem(still, clear)


def test_runner_folders_are_named_by_content(tmp_path: Path) -> None:
    a, b = tmp_path / "sme2_runner", tmp_path / "ld-linux-aarch64.so.1"
    a.write_bytes(b"runner")
    b.write_bytes(b"loader")
    folder, pushes = runner_folder([a, b])
    assert folder.startswith(f"{CACHE_DIR}/runner-") and len(folder.rsplit("-", 1)[1]) == 16
    assert [p.mode for p in pushes] == [0o755, 0o755]      # the runner and the loader run
    a.write_bytes(b"runner 2")
    assert runner_folder([a, b])[0] != folder


def test_nothing_outside_our_folders_is_touched() -> None:
    roots = ("/data/local/tmp/pytest-sme2-s1", CACHE_DIR)
    assert check_inside(f"{CACHE_DIR}/runner-1/x", roots)
    for bad in ("/data/local/tmp/other/x", f"{CACHE_DIR}/../x", "/data/local/tmp/pytest-sme2-s1"):
        with pytest.raises(DeviceError, match="refusing to touch"):
            check_inside(bad, roots)


def test_pruning_keeps_the_recently_used_runner_and_model_folders_only() -> None:
    cmd = prune_command()
    assert f"cd {CACHE_DIR} " in cmd and f"tail -n +{KEEP_RUNNERS + 1}" in cmd
    assert 'runner-*) rm -rf "./$d"' in cmd          # only our folders, relative to the cache
    assert f"tail -n +{KEEP_MODELS + 1}" in cmd and 'model-*) rm -rf "./$d"' in cmd


def test_the_free_space_is_read_from_df_and_a_push_that_does_not_fit_is_one_line(tmp_path):
    assert "df -k /data/local/tmp" in free_kb_command()
    assert free_bytes("abc\nfree-kb:2048\n") == 2 * 1024 * 1024
    assert free_bytes("abc\nfree-kb:\n") is None        # df said nothing: no check
    pte = tmp_path / "m.pte"
    pte.write_bytes(b"x" * 3000)
    push = Push(pte, f"{CACHE_DIR}/model-1/m.pte", 0o644, "s")
    check_room("S1", [push], 4000)
    check_room("S1", [push], None)
    with pytest.raises(DeviceError) as ei:
        check_room("S1", [push], 2048)
    assert str(ei.value) == (f"device S1 has 2.0 KB free in /data/local/tmp and this run must "
                             f"push 3.0 KB (m.pte); free space on the device (this plugin's "
                             f"files: {CACHE_DIR}) and run again")


class _Device(DeviceBase):
    spec = "x"

    def __init__(self, abi: str, sme2: bool | None, samples: bool = True,
                 sme: bool | None = None):
        self._facts = SimpleNamespace(abi=abi, sme2=sme2, sme=sme2 if sme is None else sme)
        self.samples_kernels = samples

    def facts(self):
        return self._facts


class _Native(RunnerBase):
    preloads = True


@pytest.mark.parametrize("mode, device, runner, wanted", [
    ("auto", _Device("arm64-v8a", True), _Native(), True),
    ("auto", _Device("arm64-v8a", None), _Native(), True),     # cannot tell: sample
    ("auto", _Device("arm64-v8a", False), _Native(), False),   # hwcaps settle it
    # SME without SME2: its SME level, and any SME2 kernel (a dispatch bug), are sampled
    ("auto", _Device("arm64-v8a", False, sme=True), _Native(), True),
    ("auto", _Device("x86_64", False), _Native(), False),
    ("on", _Device("x86_64", False), _Native(), True),
    ("off", _Device("arm64-v8a", True), _Native(), False),
    ("on", _Device("arm64-v8a", True), RunnerBase(), False),   # the python runtime
    ("on", _Device("arm64-v8a", True, samples=False), _Native(), False),
])
def test_which_benchmarks_get_an_evidence_process(mode, device, runner, wanted) -> None:
    assert wants_sample(mode, device, runner) is wanted


def test_a_phone_request_keeps_the_generation(tmp_path: Path) -> None:
    """The phone's copy of a request carries everything but the paths: an LLM's generation
    (its prompt and new tokens, a phase-only process's phase) was dropped, and the phone ran
    the program as a forward pass on no inputs."""
    from pytest_sme2.devices.android.device import AndroidDevice
    from pytest_sme2.results import Generation
    from pytest_sme2.runners.base import RunRequest

    pte = tmp_path / "llm.pte"
    pte.write_bytes(b"pte")
    device = AndroidDevice.__new__(AndroidDevice)
    device.session_dir = "/data/local/tmp/pytest-sme2-s"
    for generation in (Generation(16, 4), Generation(16, 4).decode_only()):
        request = RunRequest(pte=pte, etdump=tmp_path / "a" / "on-block0.decode-only.etdump",
                             threads=2, runs=7, warmup=0, timeout_s=9.0,
                             generation=generation,
                             kernel_sample=tmp_path / "a" / "x.sampled.csv",
                             kernel_trace=tmp_path / "a" / "k.csv")
        phone = device._device_request(request)
        assert phone.generation == generation
        assert (phone.threads, phone.runs, phone.warmup, phone.timeout_s) == (2, 7, 0, 9.0)
        assert str(phone.etdump) == "/data/local/tmp/pytest-sme2-s/out/on-block0.decode-only.etdump"
        # The program is kept between sessions (a second session pushes nothing).
        assert str(phone.pte).startswith(f"{CACHE_DIR}/model-")
        assert str(phone.kernel_sample) == "/data/local/tmp/pytest-sme2-s/out/samples.txt"
        assert phone.kernel_trace is None          # nothing traces on a phone
