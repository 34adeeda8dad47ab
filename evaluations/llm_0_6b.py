"""A 0.6B-class LLM end to end, and what it costs (docs/measurements/llm-0.6b.md). (Not a
test: prints figures.)

    python evaluations/llm_0_6b.py [--schemes 8da8w,8da4w] [--steps export,host,qemu,phone]
        [--prompt 64] [--new 32] [--runs 5] [--qemu-prompt 8] [--qemu-new 2]

The model is Qwen3-0.6B's shape as ExecuTorch's Llama with seeded random weights
(pytest_sme2_models.qwen3_0_6b), plain attention (``PLAIN_SPEC``: it runs on QEMU and the
phone too; the custom-SDPA form's figures are evaluations/text_llm_runner.py's and
evaluations/context_depth.py's). Per scheme:
- export: in its own process (its peak RSS is the export's), into the user's export cache (a
  hit the next time: the figures are then the cached export's own, from its metadata);
- host: one pytest session of the generation benchmark (1 thread): load time, peak RSS,
  prefill and decode;
- qemu: a short generation on the emulated SME2 CPU: each phase's kernels, traced in its own
  process (one side: the SME2 pair would be 2 blocks a side, each loading 1 GB under QEMU);
- phone: two pytest sessions on a fake phone behind a real adb server: the push time of the
  first and what the second pushes.
Every figure comes with the load average when it was taken (2 shared cores here).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, comma_list

from pytest_sme2_models.qwen3_0_6b import PLAIN_SPEC as SPEC, SCHEMES
from tests.long.test_llm_0_6b import KERNELS    # the long test's inner session: one copy

EXPORT = """
import sys
from pytest_sme2.api import export_model
m = export_model(sys.argv[1], sys.argv[2], progress=lambda s: print(s, flush=True))
print("META", m.pte, m.meta.get("export_seconds"), flush=True)
"""
GENERATE = """
def test_generation(sme2_generate, sme2_llm_case):
    sme2_generate(sme2_llm_case.model, scheme=sme2_llm_case.dtype, threads=1)
"""


def load() -> str:
    return "load " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def export(scheme: str) -> dict:
    from pytest_sme2.api import export_model

    t0, before = time.perf_counter(), load()
    proc = subprocess.run([sys.executable, "-c", EXPORT, SPEC, scheme], text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        sys.exit(f"export {scheme} failed:\n{proc.stdout[-3000:]}")
    m = export_model(SPEC, scheme)                 # a hit now: its metadata
    meta = m.meta
    return {"scheme": scheme, "hit": "exporting" not in proc.stdout,
            "wall_s": meta["export_seconds"], "cpu_s": meta["export_cpu_seconds"],
            "peak_gb": meta["export_peak_rss_bytes"] / 1e9, "params": meta["parameters"],
            "pte_mb": m.pte.stat().st_size / 1e6, "this_call_s": time.perf_counter() - t0,
            "load": before, "stages": [line.strip() for line in proc.stdout.splitlines()
                                       if ": " in line and " s" in line][:12]}


def session(base: Path, name: str, body: str, scheme: str, args: list[str],
            env: dict | None = None) -> tuple[dict | None, list[str], float, str]:
    folder = base / name
    folder.mkdir(parents=True)
    (folder / "test_big.py").write_text(body)
    before = load()
    cmd = [sys.executable, "-m", "pytest", str(folder / "test_big.py"), "-q", "-s",
           "-p", "no:cacheprovider", f"--rootdir={folder}", f"--sme2-llm-models={SPEC}",
           f"--sme2-llm-schemes={scheme}", "--sme2-threads=1",
           f"--report-dir={folder / 'report'}", *args]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=folder, env=env, text=True, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT)
    wall = time.perf_counter() - t0
    lines = proc.stdout.splitlines()
    if proc.returncode != 0:
        print("\n".join(lines[-40:]))
        return None, lines, wall, before
    doc = json.loads((folder / "report" / "results.json").read_text())
    return doc, lines, wall, before


def generation_figures(doc: dict) -> str:
    b = doc["benchmarks"][0]
    g, s = b["generation"], b["startup"]
    return (f"load {s['load_ms']:.4g} ms, peak RSS {s['peak_rss_kb'] / 1e6:.3g} GB; "
            f"prefill {g['prefill']['tokens_per_s']:.4g} tok/s (pp{g['prompt_tokens']}, "
            f"{g['prefill']['median_ms']:.4g} ms), decode {g['decode']['tokens_per_s']:.4g} "
            f"tok/s (tg{g['new_tokens']}, {g['decode']['token_median_ms']:.4g} ms/token, "
            f"CV {g['decode']['token_cv_pct']:.3g}%)")


def phone(base: Path, scheme: str, a) -> None:
    from tests.fakes.adb_device import FakeAndroidConfig
    from tests.fakes.android import AdbServer, connect_phone, release_phone

    server = AdbServer(base / "adb").start()
    handset = connect_phone(server, base / "phone", FakeAndroidConfig(serial_no="BIG1"))
    env = {**os.environ, **{k: v for k, v in server.env.items()
                            if k.startswith(("ANDROID_", "ADBUTILS_", "ADB_"))}}
    try:
        for i in (1, 2):
            doc, lines, wall, before = session(
                base, f"phone-{scheme}-{i}", GENERATE, scheme,
                [f"--device=android:{handset.serial}", f"--sme2-prompt-tokens={a.prompt}",
                 f"--sme2-new-tokens={a.new}", f"--runs={a.runs}", "--warmup=1",
                 "--sme2-loads=1"], env)
            pushed = [line.split("sme2: ", 1)[-1] for line in lines if " pushed " in line]
            print(f"  phone session {i} ({wall:.0f} s, {before}): "
                  f"{'; '.join(pushed) or 'pushed nothing'}")
            if doc:
                print(f"    {generation_figures(doc)}")
    finally:
        release_phone(handset)
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--schemes", type=comma_list, default=list(SCHEMES))
    ap.add_argument("--steps", type=comma_list, default=["export", "host", "qemu", "phone"])
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--new", type=int, default=32)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--qemu-prompt", type=int, default=8)
    ap.add_argument("--qemu-new", type=int, default=2)
    a = ap.parse_args()
    print(f"{SPEC}\n{os.cpu_count()} CPUs, {load()}")
    with tempfile.TemporaryDirectory(prefix="llm-0.6b-") as tmp:
        base = Path(tmp)
        for scheme in a.schemes:
            print(f"== {scheme}")
            if "export" in a.steps:
                e = export(scheme)
                print(f"  export{' (cached)' if e['hit'] else ''}: {e['wall_s']:.0f} s wall, "
                      f"{e['cpu_s']:.0f} s CPU, peak RSS {e['peak_gb']:.2f} GB, "
                      f"{e['params'] / 1e6:.0f}M parameters, .pte {e['pte_mb']:.0f} MB "
                      f"({e['load']})")
            if "host" in a.steps:
                doc, _, wall, before = session(
                    base, f"host-{scheme}", GENERATE, scheme,
                    [f"--sme2-prompt-tokens={a.prompt}", f"--sme2-new-tokens={a.new}",
                     f"--runs={a.runs}", "--warmup=1", "--sme2-loads=3"])
                if doc:
                    print(f"  host ({wall:.0f} s session, {before}): {generation_figures(doc)}")
            if "qemu" in a.steps:
                doc, lines, wall, before = session(
                    base, f"qemu-{scheme}", KERNELS, scheme,
                    ["--device=qemu", f"--sme2-prompt-tokens={a.qemu_prompt}",
                     f"--sme2-new-tokens={a.qemu_new}", "--runs=1", "--warmup=0",
                     "--sme2-loads=1"])
                print(f"  qemu ({wall:.0f} s session, {before}):")
                for line in dict.fromkeys(lines):
                    if line.startswith("KERNELS") or re.search(r"still running", line):
                        print(f"    {line}")
            if "phone" in a.steps:
                phone(base, scheme, a)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
