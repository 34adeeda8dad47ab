"""An LLM's SME2 pair on the two emulated SME2 devices, each phase's kernels proven apart:
traced under QEMU (``--device qemu``), sampled on the fake arm64 phone. The phase-only evidence
processes run beside each side's first block (issue 30). Two programs: a user's export_llama
8da4w .pte (NEON int4 kernels in both phases) and the zoo's tiny_llama_plain 8da8w (SME2 int8
kernels in both phases on the SME2 side). The same checkpoint exported with ExecuTorch's custom
SDPA is refused on both in one line before any process: the wheel's custom-ops library cannot
go with our runner to an Arm64 target (issue 45)."""

import json
import shutil
from pathlib import Path

import pytest
from tests.needs import missing

pytestmark = pytest.mark.usefixtures("inner_session_env")

QEMU_TESTS = """
import pytest

SME = ("SME", "SME2")


def kernels(ev):
    return sorted({(k.isa_family, k.name) for k in ev.executed_kernels})


def pair(sme2_compare, sme2_off, sme2_on, model, dtype):
    cmp = sme2_compare(sme2_off, sme2_on, model, dtype=dtype, prompt_tokens=16, new_tokens=4)
    assert cmp.outputs.equal, cmp.outputs              # the same token ids on both sides
    off, on = cmp.base_blocks[0], cmp.candidate_blocks[0]
    for side in (off, on):
        assert len(side.generation.tokens) == 5
        for phase in (side.generation.prefill, side.generation.decode):
            ev = phase.kernel_evidence
            # Each phase's own process, traced: what ran in that phase, every kernel.
            assert ev is not None and ev.traced, (side.runner.name, phase.phase, ev)
            assert ev.executed_kernels, (side.runner.name, phase.phase, ev.reason)
            print("KERNELS", model, dtype, side.runner.name, phase.phase, ev.sme2, kernels(ev))
    for phase in (off.generation.prefill, off.generation.decode):   # masked: no SME code
        ev = phase.kernel_evidence
        assert ev.sme2 == "absent", ev.reason
        assert not any(k.isa_family in SME for k in ev.executed_kernels), kernels(ev)
    return on


def test_8da4w(sme2_compare, sme2_off, sme2_on, sme2_emulated):
    assert sme2_emulated
    on = pair(sme2_compare, sme2_off, sme2_on, "llm.pte", "pte")
    # 8da4w: XNNPACK's NEON (i8mm/dotprod) int4 kernels, no SME code in either phase.
    for phase in (on.generation.prefill, on.generation.decode):
        ev = phase.kernel_evidence
        assert not any(k.isa_family in SME for k in ev.executed_kernels), kernels(ev)


def test_8da8w(sme2_compare, sme2_off, sme2_on):
    # The zoo's tiny_llama (plain attention), 8-bit dynamic activations and int8 weights: SME2
    # in each phase.
    on = pair(sme2_compare, sme2_off, sme2_on, "tiny_llama_plain", "8da8w")
    for phase in (on.generation.prefill, on.generation.decode):
        ev = phase.kernel_evidence
        assert ev.sme2 == "proven", (phase.phase, ev.reason)
        assert any(k.isa_family == "SME2" for k in ev.executed_kernels), kernels(ev)
""" + """

def test_custom_sdpa_is_one_line(sme2_generate):
    sme2_generate("sdpa.pte", threads=1, prompt_tokens=8, new_tokens=2)
"""
REFUSED = ("sdpa.pte: calls llama::update_cache.out, llama::custom_sdpa.out, which the "
           "executorch wheel registers from libcustom_ops_aot_lib.so; our runner cannot load "
           "that on")


@pytest.fixture
def qemu_ready(provisioned_qemu):
    if not provisioned_qemu:
        missing("QEMU", "run `pytest-sme2 setup qemu`")


def test_an_llm_pair_on_the_emulated_sme2_cpu(pytester, run_pytest, qemu_ready,
                                              tiny_llama_exports, tiny_llama_8da4w,
                                              tiny_llama_8da4w_sdpa):
    shutil.copyfile(tiny_llama_8da4w, pytester.path / "llm.pte")
    shutil.copyfile(tiny_llama_8da4w_sdpa, pytester.path / "sdpa.pte")
    pytester.makepyfile(test_llm=QEMU_TESTS)
    res = run_pytest("--device=qemu", f"--sme2-cache-dir={tiny_llama_exports}", "--runs=1",
                     "--warmup=0", "--sme2-blocks=2", "--sme2-confirm-blocks=0",
                     "--sme2-loads=1", "-s")
    print(res.stdout.str())
    res.assert_outcomes(passed=2, failed=1)
    assert f"{REFUSED} --device qemu" in res.stdout.str()
    # Refused before any process: no artefact of that benchmark's runner.
    assert not list((pytester.path / "sme2-report").rglob("*custom_sdpa*.etdump"))
    doc = json.loads((pytester.path / "sme2-report" / "results.json").read_text())
    firsts = [b for b in doc["benchmarks"] if b["block"] == 0]
    assert len(firsts) == 4
    for b in firsts:
        for phase in ("prefill", "decode"):
            ev = b["generation"][phase]["kernel_evidence"]
            assert ev["executed_kernels"] and ev["reason"].startswith("kernel trace"), ev
        # The phase-only processes' files lie beside the block's, never over them.
        etdump = Path(b["etdump"])
        stem = etdump.name.removesuffix(".etdump")
        for phase in ("prefill", "decode"):
            # Their kernels are what they are for: they trace no run (no ETDump of theirs).
            assert not (etdump.parent / f"{stem}.{phase}-only.etdump").exists()
            assert (etdump.parent / f"{stem}.{phase}-only.kernels.csv").is_file()
        assert (etdump.parent / f"{stem}.kernels.csv").is_file()     # the block's own
        # The block's kernels are its decode steps': the decode-only process's, not the whole
        # process's trace (which has the prefill's too).
        assert Path(b["kernel_trace"]).name == f"{stem}.decode-only.kernels.csv"
        assert b["kernel_evidence"]["executed_kernels"] == \
            b["generation"]["decode"]["kernel_evidence"]["executed_kernels"]


PHONE_TESTS = """
import pytest

SME = ("SME", "SME2")


@pytest.mark.parametrize("model, dtype", [("llm.pte", "pte"), ("tiny_llama_plain", "8da8w")])
def test_llm_pair(sme2_compare, sme2_off, sme2_on, sme2_emulated, model, dtype):
    assert sme2_emulated
    cmp = sme2_compare(sme2_off, sme2_on, model, dtype=dtype, prompt_tokens=16, new_tokens=4)
    assert cmp.outputs.equal, cmp.outputs              # the same token ids on both sides
    for side in (cmp.base_blocks[0], cmp.candidate_blocks[0]):
        gen = side.generation
        assert len(gen.tokens) == 5 and gen.device.kind == "android"
        for phase in (gen.prefill, gen.decode):
            ev = phase.kernel_evidence
            # Nothing traces on a phone: each phase-only process is sampled.
            assert ev is not None and ev.sampled and not ev.traced, (side.runner.name, ev)
            assert ev.samples_total > 0, ev
            print("KERNELS", model, dtype, side.runner.name, phase.phase, ev.sme2,
                  ev.samples_total,
                  sorted({(k.isa_family, k.name, k.samples) for k in ev.sampled_kernels}))
    for phase in (cmp.base_blocks[0].generation.prefill, cmp.base_blocks[0].generation.decode):
        # Masked: no SME code sampled (sampling alone proves no absence; the hwcaps do).
        ev = phase.kernel_evidence
        assert not any(k.isa_family in SME for k in ev.sampled_kernels), ev.sampled_kernels
        assert ev.sme2 == "absent", ev.reason


def test_custom_sdpa_is_one_line(sme2_generate):
    sme2_generate("sdpa.pte", threads=1, prompt_tokens=8, new_tokens=2)
"""


def test_an_llm_pair_on_an_arm64_phone(pytester, run_pytest, fake_arm64_android, adb_server,
                                       monkeypatch, tiny_llama_exports, tiny_llama_8da4w,
                                       tiny_llama_8da4w_sdpa):
    for key, value in adb_server.env.items():
        monkeypatch.setenv(key, value)
    shutil.copyfile(tiny_llama_8da4w, pytester.path / "llm.pte")
    shutil.copyfile(tiny_llama_8da4w_sdpa, pytester.path / "sdpa.pte")
    pytester.makepyfile(test_llm=PHONE_TESTS)
    res = run_pytest(f"--device=android:{fake_arm64_android.serial}",
                     f"--sme2-cache-dir={tiny_llama_exports}", "--runs=1", "--warmup=0",
                     "--sme2-blocks=2", "--sme2-confirm-blocks=0", "--sme2-loads=1",
                     "--sme2-sample=on", "-s")
    print(res.stdout.str())
    res.assert_outcomes(passed=2, failed=1)
    assert f"{REFUSED} device {fake_arm64_android.serial}" in res.stdout.str()
    doc = json.loads((pytester.path / "sme2-report" / "results.json").read_text())
    firsts = [b for b in doc["benchmarks"] if b["block"] == 0]
    assert len(firsts) == 4
    for b in firsts:
        assert b["device"]["kind"] == "android"
        etdump = Path(b["etdump"])                  # pulled from the phone, beside the block's
        stem = etdump.name.removesuffix(".etdump")
        for phase in ("prefill", "decode"):
            assert b["generation"][phase]["kernel_evidence"]["samples_total"] > 0
            assert not (etdump.parent / f"{stem}.{phase}-only.etdump").exists()  # none traced
            assert (etdump.parent / f"{stem}.{phase}-only.sampled.csv").is_file()
        assert b["kernel_sample"] == str(etdump.parent / f"{stem}.decode-only.sampled.csv")
    # A side's later blocks carry its first block's decode samples.
    assert all(b.get("kernel_sample", "").endswith("-block0.decode-only.sampled.csv")
               for b in doc["benchmarks"])
    # Every phase-only process ran the token loop on the phone (its generation reached it).
    runs = [c for c in fake_arm64_android.device.commands if "sme2_runner" in c]
    assert runs and all("--generate" in c for c in runs if "timeout" in c)
    # The refused program never reached the phone.
    assert not any("sdpa" in c for c in fake_arm64_android.device.commands)
