"""Kernels proven by execution: QEMU block logs, guest maps, symbol attribution, the CSV and the
verdict they feed. Logs, maps and symbol tables are built here; one test builds a real aarch64
library when the cross compiler is present."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pytest_sme2.analysis import addresses
from pytest_sme2.analysis import kernel_trace as kt
from pytest_sme2.analysis.addresses import MappedRegion, SymbolTable, parse_maps
from pytest_sme2.analysis.kernel_trace import (
    TRACE_COLUMNS,
    KernelTrace,
    executed_kernels,
    parse_block_starts,
    read_kernel_trace_csv,
    write_kernel_trace_csv,
)
from pytest_sme2.analysis.kernels import DispatchBugError, sme2_verdict
from pytest_sme2.errors import Sme2Error
from pytest_sme2.results import TracedKernel
from tests.needs import tool

XNN_LIB = "/data/local/tmp/sme2/lib/libexecutorch_backend_xnnpack.so"
LIBC = "/apex/com.android.runtime/lib64/bionic/libc.so"
BASE, LIBC_BASE = 0x7F00_0000_0000, 0x7F10_0000_0000
SME2_MOPA = "kai_run_matmul_clamp_f32_f32p2vlx1_f32p2vlx1biasf32_sme2_mopa"
SME2_BODY = "kai_kernel_matmul_clamp_f32_f32p2vlx1_f32p2vlx1biasf32_sme2_mopa"
SME1_MOPA = "kai_run_matmul_clamp_f32_f32p2vlx1_f32p2vlx1b_2vlx2vl_sme_mopa"
NEON_DOT = "kai_run_matmul_clamp_f32_qai8dxp4x8_qsi8cxp4x8_16x4_neon_dotprod"
XNN_SME2 = "xnn_pf32_gemm_minmax_ukernel_1x32__neonsme2"

# The library's text is mapped at file offset 0x1000, loaded at vaddr 0x11000: attribution must
# go through PT_LOAD (file offset != vaddr), as in real libraries.
TABLE = SymbolTable(
    segments=((0x0, 0x0, 0x1000), (0x1000, 0x11000, 0x8000)),
    functions=(
        (0x11000, 0x100, SME2_MOPA),
        (0x11100, 0x200, SME2_BODY),
        (0x11400, 0x100, SME1_MOPA),
        (0x11600, 0x100, NEON_DOT),
        (0x11800, 0x100, XNN_SME2),
        (0x11A00, 0x40, "kai_get_m_step_matmul_clamp_f32_f32p2vlx1_f32p2vlx1biasf32_sme2_mopa"),
        (0x11B00, 0x80, "xnn_create_fully_connected_nc_pf32"),
        # 0x11B80..0x12000: hidden code (no symbol); nearest-preceding would say "xnn_create..."
    ),
)
LIBC_TABLE = SymbolTable(segments=((0, 0, 0x10000),), functions=((0x100, 0x100, "memcpy"),))


def addr(vaddr: int) -> int:
    """Guest address of a library vaddr in the synthetic mapping (text at BASE, offset 0x1000)."""
    return BASE + vaddr - 0x11000


MAPS = f"""\
{BASE - 0x1000:x}-{BASE:x} r--p 00000000 fe:00 42  {XNN_LIB}
{BASE:x}-{BASE + 0x8000:x} r-xp 00001000 fe:00 42  {XNN_LIB}
{BASE + 0x8000:x}-{BASE + 0x9000:x} rw-p 00009000 fe:00 42  {XNN_LIB}
{LIBC_BASE:x}-{LIBC_BASE + 0x10000:x} r-xp 00000000 fe:00 7  {LIBC}
7fff00000000-7fff00001000 r-xp 00000000 00:00 0  [vdso]
7ffe00000000-7ffe00021000 rw-p 00000000 00:00 0  [stack]
"""


def block(address: int, *insns: str) -> str:
    lines = [f"0x{address + 4 * i:012x}:  d503201f  {insn}" for i, insn in enumerate(insns)]
    return "----------------\nIN: \n" + "\n".join(lines) + "\n\n"


def log_text() -> str:
    return "".join([
        block(addr(0x11000), "stp x29, x30, [sp, #-0x10]!", "bl #0x11100"),   # kai_run sme2
        block(addr(0x11100), "stp d8, d9, [sp, #0x40]", "smstart"),              # kai_kernel
        block(addr(0x11140), "fmopa za0.s, p0/m, p1/m, z0.s, z1.s", "b.ne #0x11140"),
        block(addr(0x11180), "st1w {za0v.s[w12, 0]}, p0, [x3]", "smstop"),
        block(addr(0x11600), "sdot v0.4s, v1.16b, v2.16b", "ret"),               # neon kai
        block(addr(0x11A00), "mov x0, #2", "ret"),                               # kai_get_: glue
        block(addr(0x11B00), "mov x0, #0", "ret"),                               # xnn_create
        block(addr(0x11C00), "ld1w {za1h.s[w12, 0]}, p2/z, [x25]", "ret"),       # hidden SME
        block(LIBC_BASE + 0x100, "ldp q0, q1, [x1]", "ret"),                     # memcpy
        block(LIBC_BASE + 0x300, "svc #0"),                                      # libc, no sym
        block(0x7FFF00000010, "svc #0"),                                         # vdso
        block(addr(0x11000), "stp x29, x30, [sp, #-0x10]!", "bl #0x11100"),   # retranslated
    ])


def symbols(path: str) -> SymbolTable | None:
    return {XNN_LIB: TABLE, LIBC: LIBC_TABLE}.get(path)


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    log, maps = tmp_path / "asm.log", tmp_path / "maps.txt"
    log.write_text(log_text())
    maps.write_text(MAPS)
    return log, maps


@pytest.fixture
def trace(files) -> KernelTrace:
    return executed_kernels(*files, symbols=symbols)


# --- parse_block_starts ---------------------------------------------------------------------


def test_block_starts_and_sme_instructions() -> None:
    text = "".join([
        block(0x1000, "nop", "smstart"),
        block(0x2000, "fmopa za0.s, p0/m, p1/m, z0.s, z1.s"),
        block(0x3000, "ld1w {za1h.s[w12, 0]}, p2/z, [x25, x22, lsl #2]"),
        block(0x4000, "zero {zt0}"),
        block(0x5000, "rdsvl x0, #1"),
        block(0x6000, "ld1w {z0.s}, p0/z, [x0]", "fmla v0.4s, v1.4s, v2.4s", "b #0x1000"),
        block(0x7000, ".byte    0x20, 0x58, 0xbf, 0x04"),   # undecoded: not counted as SME
        block(0x8000, "add x0, x0, #0x10", "bl #0x7fza"),
    ])
    assert parse_block_starts(text) == {0x1000: True, 0x2000: True, 0x3000: True, 0x4000: True,
                                        0x5000: True, 0x6000: False, 0x7000: False,
                                        0x8000: False}


def test_retranslated_block_counts_once_and_is_sme_if_any_translation_is() -> None:
    text = block(0x1000, "nop") + block(0x1000, "nop", "smstart") + block(0x1000, "nop")
    assert parse_block_starts(text) == {0x1000: True}


def test_host_code_of_out_asm_is_not_guest_code() -> None:
    text = block(0x1000, "nop") + "OUT: [size=64]\n0x7f0000001000:  fmopa za0.s\n\n"
    assert parse_block_starts(text) == {0x1000: False}


def test_log_cut_short_keeps_its_blocks(tmp_path: Path) -> None:
    p = tmp_path / "cut.log"
    p.write_text(block(0x1000, "nop") + "----------------\nIN: \n0x0000000020")
    assert parse_block_starts(p) == {0x1000: False}


def test_qemu_symbol_after_in_and_missing_encoding_column() -> None:
    text = "IN: main\n0x0000000000400100:  smstop\n"
    assert parse_block_starts(text) == {0x400100: True}


# --- parse_maps ---------------------------------------------------------------------------------


def test_parse_maps() -> None:
    text = ("1000-2000 r-xp 00003000 fe:00 1 /lib/a b.so (deleted)\n"
            "3000-4000 rw-p 00000000 00:00 0 \n"
            "garbage\n"
            "zz-yy r-xp 0 0 0 /x\n")
    assert parse_maps(text) == [MappedRegion(0x1000, 0x2000, 0x3000, True, "/lib/a b.so"),
                                MappedRegion(0x3000, 0x4000, 0, False, "")]


# --- symbols ------------------------------------------------------------------------------------


def test_function_at_uses_segments_and_sizes() -> None:
    assert TABLE.function_at(0x1000) == SME2_MOPA             # file offset 0x1000 = vaddr 0x11000
    assert TABLE.function_at(0x1150) == SME2_BODY
    assert TABLE.function_at(0x1B7F) == "xnn_create_fully_connected_nc_pf32"
    assert TABLE.function_at(0x1C00) is None                  # hidden code: no neighbour's name
    assert TABLE.function_at(0x20000) is None                 # outside every segment


# --- executed_kernels -------------------------------------------------------------------------


def test_kernels_rows(trace: KernelTrace) -> None:
    assert list(trace.kernels.columns) == TRACE_COLUMNS
    rows = trace.kernels.to_dict("records")
    lib = "libexecutorch_backend_xnnpack.so"
    assert rows == [
        # kai_run_X and its body kai_kernel_X are one micro-kernel, named by the entry point.
        {"name": SME2_MOPA, "isa_family": "SME2", "isa": "sme2_mopa", "kind": "kleidiai",
         "library": lib, "blocks": 4, "streaming_blocks": 3},
        {"name": NEON_DOT, "isa_family": "NEON", "isa": "neon_dotprod", "kind": "kleidiai",
         "library": lib, "blocks": 1, "streaming_blocks": 0},
    ]


def test_totals_and_unattributed(trace: KernelTrace) -> None:
    assert trace.blocks_total == 11
    assert trace.streaming_blocks == 4
    assert trace.unattributed.to_dict("records") == [
        {"library": "[vdso]", "reason": "not a library file", "blocks": 1, "streaming_blocks": 0},
        {"library": "libc.so", "reason": "no function symbol", "blocks": 1, "streaming_blocks": 0},
        {"library": "libexecutorch_backend_xnnpack.so", "reason": "no function symbol",
         "blocks": 1, "streaming_blocks": 1},
    ]
    assert trace.blocks_attributed == 8        # kernels, kai_get_, xnn_create, memcpy
    assert trace.streaming_unattributed == 1
    assert "11 blocks executed, 8 in named functions; 2 micro-kernels by ISA: NEON 1, SME2 1; " \
           "streaming SME code executed: 4 blocks" in trace.summary()


def test_xnnpack_ukernel_is_kept(tmp_path: Path) -> None:
    log, maps = tmp_path / "l", tmp_path / "m"
    log.write_text(block(addr(0x11800), "smstart"))
    maps.write_text(MAPS)
    t = executed_kernels(log, maps, symbols=symbols)
    assert t.executed == (TracedKernel(XNN_SME2, "SME2", "xnnpack",
                                       "libexecutorch_backend_xnnpack.so", 1, 1),)


def test_libraries_root_maps_device_paths_to_local_copies(files, tmp_path, monkeypatch) -> None:
    root = tmp_path / "pulled"
    (root / "lib").mkdir(parents=True)
    (root / "lib" / "libexecutorch_backend_xnnpack.so").write_bytes(b"elf")
    (root / "libc.so").write_bytes(b"elf")
    seen = []

    def fake_read(path: Path) -> SymbolTable:
        seen.append(path)
        return {"libexecutorch_backend_xnnpack.so": TABLE, "libc.so": LIBC_TABLE}[path.name]

    monkeypatch.setattr(addresses, "read_symbols", fake_read)
    t = executed_kernels(*files, libraries_root=root)
    assert sorted(seen) == [root / "lib" / "libexecutorch_backend_xnnpack.so", root / "libc.so"]
    assert list(t.kernels["name"]) == [SME2_MOPA, NEON_DOT]


def test_library_missing_under_root_is_unattributed_not_a_host_file(files, tmp_path,
                                                                    monkeypatch) -> None:
    root = tmp_path / "pulled"
    root.mkdir()
    (root / "libexecutorch_backend_xnnpack.so").write_bytes(b"elf")
    monkeypatch.setattr(addresses, "read_symbols", lambda path: TABLE)
    t = executed_kernels(*files, libraries_root=root)
    assert ("libc.so", "library not found here", 2) in [
        (r.library, r.reason, r.blocks) for r in t.unattributed.itertuples()]


# --- errors -------------------------------------------------------------------------------------


def _one_line(err: pytest.ExceptionInfo, *parts: str) -> None:
    msg = str(err.value)
    assert "\n" not in msg
    for part in parts:
        assert part in msg


def test_missing_log(files) -> None:
    log, maps = files
    log.unlink()
    with pytest.raises(Sme2Error) as err:
        executed_kernels(log, maps, symbols=symbols)
    _one_line(err, str(log), "-d in_asm")


@pytest.mark.parametrize("content", ["", "----------------\nIN: \n", "qemu: uncaught signal\n"])
def test_log_without_blocks(files, content) -> None:
    log, maps = files
    log.write_text(content)
    with pytest.raises(Sme2Error) as err:
        executed_kernels(log, maps, symbols=symbols)
    _one_line(err, str(log), "no translated blocks")


def test_missing_maps(files) -> None:
    log, maps = files
    maps.unlink()
    with pytest.raises(Sme2Error) as err:
        executed_kernels(log, maps, symbols=symbols)
    _one_line(err, str(maps), "/proc/self/maps", "did not finish")


def test_empty_maps(files) -> None:
    log, maps = files
    maps.write_text("")
    with pytest.raises(Sme2Error) as err:
        executed_kernels(log, maps, symbols=symbols)
    _one_line(err, str(maps), "no executable mappings")


def test_maps_of_another_run(files) -> None:
    log, maps = files
    maps.write_text(MAPS.replace("7f", "7e"))
    with pytest.raises(Sme2Error) as err:
        executed_kernels(log, maps, symbols=symbols)
    _one_line(err, str(maps), "another run")


def test_device_paths_without_local_copies(files) -> None:
    with pytest.raises(Sme2Error) as err:
        executed_kernels(*files)                    # /data/local/tmp/... is not on this host
    _one_line(err, "none of the 2 libraries", XNN_LIB, "libraries_root")


def test_libraries_root_not_a_folder(files, tmp_path) -> None:
    with pytest.raises(Sme2Error) as err:
        executed_kernels(*files, libraries_root=tmp_path / "nope")
    _one_line(err, "nope", "not a folder")


# --- CSV ----------------------------------------------------------------------------------------


def test_csv_round_trip(trace: KernelTrace, tmp_path: Path) -> None:
    path = write_kernel_trace_csv(trace, tmp_path / "out" / "k.csv")
    header = path.read_text().splitlines()[0]
    assert header == "name,isa_family,isa,kind,library,blocks,streaming_blocks"
    back = read_kernel_trace_csv(path)
    assert back.source == str(path)
    assert back.kernels.to_dict("records") == trace.kernels.to_dict("records")
    assert back.unattributed.to_dict("records") == trace.unattributed.to_dict("records")
    assert (back.blocks_total, back.streaming_blocks) == (11, 4)
    assert back.executed == trace.executed


def test_csv_of_a_trace_without_kernels(tmp_path: Path) -> None:
    empty = kt.attribute({0x10: False}, [MappedRegion(0, 0x100, 0, True, "")], symbols)
    back = read_kernel_trace_csv(write_kernel_trace_csv(empty, tmp_path / "k.csv"))
    assert back.executed == () and back.blocks_total == 1 and back.streaming_blocks == 0


@pytest.mark.parametrize(("content", "msg"), [
    (None, "no such kernel-trace CSV"),
    ("", "not a kernel-trace CSV"),
    ("name,isa_family\nx,SME2\n", "missing columns isa, kind"),
    ("name,isa_family,isa,kind,library,blocks,streaming_blocks\n", "no total row"),
])
def test_bad_csv(tmp_path: Path, content: str | None, msg: str) -> None:
    p = tmp_path / "k.csv"
    if content is not None:
        p.write_text(content)
    with pytest.raises(Sme2Error) as err:
        read_kernel_trace_csv(p)
    _one_line(err, str(p), msg)


# --- the verdict from executed kernels ----------------------------------------------------------


def _trace(rows: list[tuple[str, str, int]], streaming: int = 0, hidden: int = 0) -> KernelTrace:
    """A trace holding kernels (name, isa_family, streaming blocks) and hidden SME blocks."""
    import pandas as pd

    kernels = pd.DataFrame([(n, f, "", "kleidiai", "libx.so", 5, s) for n, f, s in rows],
                           columns=TRACE_COLUMNS)
    lost = pd.DataFrame([("libx.so", "no function symbol", 10, hidden)],
                        columns=kt.UNATTRIBUTED_COLUMNS)
    return KernelTrace("t.csv", kernels, lost, 100, streaming + hidden)


PF32 = ["Convolution (NHWC, PF32)"]


def test_executed_sme2_kernels_prove_sme2() -> None:
    # SME1 packing kernels run beside SME2 matmuls (seen on QEMU -cpu max): still proven.
    t = _trace([(SME2_MOPA, "SME2", 3), ("kai_run_rhs_pack_nxk_f32p2vlx1biasf32_f32_f32_sme",
                                         "SME", 1)], 4)
    ev = sme2_verdict(kernels=None, kleidiai=PF32, device_sme2=None, executed=t)
    assert (ev.sme2, ev.reason) == (
        "proven", f"kernel trace: 1 SME2 micro-kernel executed ({SME2_MOPA})")
    assert ev.executed_kernels == list(t.executed) and ev.streaming_sme_blocks == 4
    assert ev.kernel_trace_source == "t.csv"


def test_executed_sme1_kernels_are_absent_not_proven() -> None:
    t = _trace([(SME1_MOPA, "SME", 3)], 3)
    ev = sme2_verdict(kernels=None, kleidiai=PF32, device_sme2=True, executed=t)
    assert (ev.sme2, ev.reason) == (
        "absent", f"kernel trace: SME (SME1) kernels executed ({SME1_MOPA}), no SME2")


def test_no_sme_code_at_all_is_absent_by_execution() -> None:
    ev = sme2_verdict(kernels=None, kleidiai=PF32, device_sme2=True,
                      executed=_trace([(NEON_DOT, "NEON", 0)]))
    assert (ev.sme2, ev.reason) == (
        "absent", "kernel trace: no SME or SME2 code executed (100 blocks, none with SME "
        f"instructions); 1 KleidiAI/XNNPACK kernel: NEON ({NEON_DOT})")


def test_no_kernel_symbols_and_no_sme_code_is_absent() -> None:
    ev = sme2_verdict(kernels=None, kleidiai=[], device_sme2=False, executed=_trace([]))
    assert ev.sme2 == "absent"
    assert ev.reason.endswith("no KleidiAI/XNNPACK kernel symbols among them")


def test_sme_code_without_symbols_leaves_the_verdict_to_other_sources() -> None:
    t = _trace([], hidden=6)
    ev = sme2_verdict(kernels=None, kleidiai=PF32, device_sme2=True, executed=t)
    assert ev.sme2 == "indicated"
    assert ev.reason.endswith("; kernel trace: 6 blocks with SME instructions ran in code "
                              "without symbols (libx.so), SME or SME2 cannot be told from them")
    assert sme2_verdict(kernels=None, kleidiai=PF32, device_sme2=None, executed=t).sme2 == \
        "unknown"


def test_executed_sme2_in_a_process_without_sme2_is_a_dispatch_bug() -> None:
    """qemu:sme1, or a masked process: QEMU runs the hidden SME2 instructions anyway, so the
    trace sees what real silicon without SME2 would fault on."""
    with pytest.raises(DispatchBugError) as e:
        sme2_verdict(kernels=None, kleidiai=[], device_sme2=False, device_sme=True,
                     executed=_trace([(SME1_MOPA, "SME", 2), (SME2_MOPA, "SME2", 3)], 5))
    assert str(e.value) == (
        f"dispatch bug: SME2 micro-kernel {SME2_MOPA} executed (kernel trace) in a process "
        "whose hwcaps hide SME2: it was chosen without asking for SME2, and a CPU without SME2 "
        "faults on it (SIGILL)")
    # The same trace where the process may have SME2 is no finding.
    assert sme2_verdict(kernels=None, kleidiai=[], device_sme2=None,
                        executed=_trace([(SME2_MOPA, "SME2", 3)], 3)).sme2 == "proven"


def test_sme1_kernels_executed_prove_the_sme_level_beside_sme2_absent() -> None:
    """qemu:sme1's toy_cnn fp32: SME1 matmul and packing kernels, no SME2 (an XNNPACK kernel's
    tile-size accessor is no kernel: left out)."""
    pack = "kai_run_lhs_pack_f32p2vlx1_f32_sme"
    t = _trace([(pack, "SME", 1), (SME1_MOPA, "SME", 3),
                ("xnn_qp8_f32_qc8w_gemm_minmax_ukernel_16x64c4__neonsme_get_mr", "SME", 1)], 5)
    ev = sme2_verdict(kernels=None, kleidiai=PF32, device_sme2=False, device_sme=True,
                      executed=t)
    assert (ev.sme, ev.sme2) == ("proven", "absent")
    assert ev.sme_reason == f"kernel trace: 2 SME1 kernels executed ({SME1_MOPA}, {pack})"
    assert ev.levels == f"SME: proven (SME1 kernels: {SME1_MOPA}, {pack}); SME2: absent"


@pytest.mark.parametrize("trace,device_sme,verdict,reason", [
    ([(NEON_DOT, "NEON", 0)], True, "absent", "kernel trace: no SME code executed"),
    ([(SME2_MOPA, "SME2", 3)], True, "absent",
     "kernel trace: no SME1 kernel executed (the SME code was SME2 kernels')"),
    ([(NEON_DOT, "NEON", 0)], False, "absent", "the process's hwcaps report no SME"),
])
def test_the_sme_level_is_absent_without_sme1_kernels(trace, device_sme, verdict, reason):
    ev = sme2_verdict(kernels=None, kleidiai=PF32, device_sme2=None, device_sme=device_sme,
                      executed=_trace(trace, sum(s for _, _, s in trace)))
    assert (ev.sme, ev.sme_reason) == (verdict, reason)


def test_sme_code_without_symbols_leaves_the_sme_level_unknown() -> None:
    ev = sme2_verdict(kernels=None, kleidiai=PF32, device_sme2=None, device_sme=True,
                      executed=_trace([], hidden=6))
    assert ev.sme == "unknown" and "without symbols" in ev.sme_reason


def test_execution_beats_an_xnntrace_and_packed_names() -> None:
    from pytest_sme2.results import LoggedKernel

    k = LoggedKernel("xnn_pf32_gemm_minmax_ukernel_32x32__neonsme2", "gemm", "neonsme2", True)
    ev = sme2_verdict(kernels=[k], kleidiai=PF32, device_sme2=True,
                      executed=_trace([(SME1_MOPA, "SME", 3)], 3))
    assert ev.sme2 == "absent" and ev.kernels == [k]


# --- a real aarch64 library -------------------------------------------------------------------

SRC = f"""
__attribute__((visibility("hidden"))) int xnn_f32_gemm_minmax_ukernel_4x8__neonfma(int x)
{{ return x * 3 + 1; }}
int {SME2_MOPA}(int x) {{ return xnn_f32_gemm_minmax_ukernel_4x8__neonfma(x) + 7; }}
"""


@pytest.mark.parametrize("stripped", [False, True])
def test_real_aarch64_library(tmp_path: Path, stripped: bool) -> None:
    cc = tool("aarch64-linux-gnu-gcc", "run `pytest-sme2 setup qemu`")
    from elftools.elf.elffile import ELFFile

    src, lib = tmp_path / "k.c", tmp_path / "libk.so"
    src.write_text(SRC)
    subprocess.run([cc, "-O1", "-shared", "-fPIC", "-fno-inline", "-o", str(lib), str(src)],
                   check=True)
    with lib.open("rb") as fh:
        elf = ELFFile(fh)
        text = [s for s in elf.iter_segments() if s["p_type"] == "PT_LOAD" and s["p_flags"] & 1]
        where = {s.name: s["st_value"] for s in elf.get_section_by_name(".symtab").iter_symbols()}
    if stripped:
        subprocess.run([cc.replace("gcc", "strip"), "--strip-all", str(lib)], check=True)
    base = 0x7F0000000000
    maps = "".join(f"{base + (s['p_vaddr'] & ~0xFFF):x}-{base + s['p_vaddr'] + s['p_memsz']:x} "
                   f"r-xp {s['p_offset'] & ~0xFFF:08x} fe:00 1 {lib}\n" for s in text)
    hidden = "xnn_f32_gemm_minmax_ukernel_4x8__neonfma"
    log = block(base + where[SME2_MOPA], "stp x29, x30, [sp, #-0x10]!") + \
        block(base + where[hidden], "smstart")
    (tmp_path / "asm.log").write_text(log)
    (tmp_path / "maps.txt").write_text(maps)
    t = executed_kernels(tmp_path / "asm.log", tmp_path / "maps.txt")
    named = {SME2_MOPA} if stripped else {SME2_MOPA, hidden}
    assert set(t.kernels["name"]) == named
    assert t.blocks_total == 2 and t.streaming_blocks == 1
    assert t.streaming_unattributed == (1 if stripped else 0)   # hidden code once stripped
