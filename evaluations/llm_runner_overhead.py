"""Our native runner's cost per decode token over a minimal C++ loop over the same Method.
(Not a unit test: prints figures.)

    python evaluations/llm_runner_overhead.py [--pte M.pte] [--prompt 16] [--new 100]
        [--generations 20] [--warmup 2] [--rounds 7]

The minimal loop (written and built here, in a scratch folder, with the runner's own
CMakeLists.txt against the same ExecuTorch wheel) does only what a decode step must: a Module
with the same ETDump event tracer, the pool at one thread, then per step a tokens[1, 1] and an
input_pos[1] tensor over two int64s, ``Module::execute``, argmax over the logits. It times each
generation's decode loop with one clock pair. Our runner (``--generate P,D``) adds its per-step
sampling timer, token bookkeeping and error checks. Both run the tiny 8da4w Llama (ExecuTorch's
export_llama .pte, tests/llm_export.py) unless ``--pte`` is given.

Processes alternate, ours then minimal, ``--rounds`` times (this VM drifts between processes);
per process the median over its timed generations of decode ms / D. Printed: each process's
figure, the medians, and the overhead = median over rounds of (ours / minimal - 1). On a VM
shared with other work, timings spread tens of percent between processes, far above 1%, so
where valgrind exists the script also counts the instructions per decode token of both (the
slope between a 10- and a 50-step generation, cachegrind): deterministic, the figure to judge
the 1% by.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

from _common import generation_parser, tiny_llama_pte


MINIMAL = r"""
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include <executorch/devtools/etdump/etdump_flatcc.h>
#include <executorch/extension/module/module.h>
#include <executorch/extension/tensor/tensor_ptr.h>
#include <executorch/runtime/platform/runtime.h>

namespace executorch::extension::threadpool {
class ThreadPool {
 public:
  bool _unsafe_reset_threadpool(uint32_t num_threads);
};
ThreadPool* get_threadpool();
}

using executorch::aten::ScalarType;
using executorch::extension::make_tensor_ptr;
using executorch::extension::module::Module;
using executorch::runtime::EValue;

int main(int argc, char** argv) {
  executorch::runtime::runtime_init();
  if (argc != 7) return 2;
  const std::string pte = argv[1];
  const int P = std::stoi(argv[2]), D = std::stoi(argv[3]), G = std::stoi(argv[4]),
            W = std::stoi(argv[5]);
  executorch::extension::threadpool::get_threadpool()->_unsafe_reset_threadpool(1);
  Module m(pte, Module::LoadMode::File, std::make_unique<executorch::etdump::ETDumpGen>());
  if (m.load_method("forward") != executorch::runtime::Error::Ok) return 3;
  std::vector<int64_t> prompt(P);
  for (int i = 0; i < P; ++i) prompt[i] = 1 + (7919LL * i + 13) % 511;
  std::vector<int64_t> tok(1), pos(1);
  std::printf("{\"decode_ms\": [");
  for (int g = 0; g < G + W; ++g) {
    pos[0] = 0;
    auto t = make_tensor_ptr({1, P}, prompt.data(), ScalarType::Long);
    auto p = make_tensor_ptr({1}, pos.data(), ScalarType::Long);
    auto out = m.execute("forward", {EValue(*t), EValue(*p)});
    if (!out.ok()) return 4;
    auto argmax = [](const executorch::aten::Tensor& l) {
      const int64_t v = l.size(l.dim() - 1);
      const float* r = l.const_data_ptr<float>() + (l.numel() - v);
      int64_t b = 0;
      for (int64_t k = 1; k < v; ++k) if (r[k] > r[b]) b = k;
      return b;
    };
    tok[0] = argmax(out->at(0).toTensor());
    pos[0] = P;
    const auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < D; ++k) {
      auto tt = make_tensor_ptr({1, 1}, tok.data(), ScalarType::Long);
      auto pp = make_tensor_ptr({1}, pos.data(), ScalarType::Long);
      auto o = m.execute("forward", {EValue(*tt), EValue(*pp)});
      tok[0] = argmax(o->at(0).toTensor());
      pos[0] += 1;
    }
    const double ms = std::chrono::duration<double, std::milli>(
        std::chrono::steady_clock::now() - t0).count();
    if (g >= W) std::printf("%s%f", g > W ? ", " : "", ms);
  }
  std::printf("]}\n");
  // Written like our runner writes it (after the loop), so both processes do the same work
  // beyond the loop.
  auto dump = static_cast<executorch::etdump::ETDumpGen*>(m.event_tracer())->get_etdump_data();
  if (FILE* f = std::fopen(argv[6], "wb")) {
    std::fwrite(dump.buf, 1, dump.size, f);
    std::fclose(f);
  }
  std::free(dump.buf);
  return 0;
}
"""


def build_minimal(scratch: Path) -> Path:
    from pytest_sme2.runners.native.cmake import SOURCE_DIR, executorch_cmake_dir

    src = scratch / "src"
    src.mkdir()
    shutil.copy(SOURCE_DIR / "CMakeLists.txt", src / "CMakeLists.txt")
    (src / "runner.cpp").write_text(MINIMAL)
    build = scratch / "build"
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    subprocess.run(["cmake", "-S", str(src), "-B", str(build), *gen,
                    f"-Dexecutorch_DIR={executorch_cmake_dir()}"], check=True,
                   capture_output=True)
    subprocess.run(["cmake", "--build", str(build)], check=True, capture_output=True)
    return build / "sme2_runner"


def _instructions(argv: list[str], out: Path) -> int:
    """Instructions the process executed (cachegrind, no cache simulation: deterministic to
    ~1e-6 between processes here)."""
    subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no",
                    f"--cachegrind-out-file={out}", *argv], capture_output=True, check=True)
    for line in out.read_text().splitlines():
        if line.startswith("summary:"):
            return int(line.split()[1])
    raise RuntimeError(f"no summary in {out}")


def instructions(ours_runner, minimal: Path, pte: Path, prompt: int, tmp: Path,
                 steps: tuple[int, int] = (10, 50)) -> None:
    """Per decode token, the slope between two decode lengths of one generation: load, prefill
    and the ETDump write cancel out, what each decode step costs is left."""
    from pytest_sme2.api import Generation, RunRequest

    counts: dict[str, list[int]] = {"ours": [], "minimal": []}
    for d in steps:
        req = RunRequest(pte, tmp / f"i{d}.etdump", threads=1, runs=1, warmup=0,
                         generation=Generation(prompt, d))
        counts["ours"].append(_instructions(ours_runner.command(req), tmp / "cg.out"))
        counts["minimal"].append(_instructions(
            [str(minimal), str(pte), str(prompt), str(d), "1", "0", str(req.etdump)],
            tmp / "cg.out"))
    per = {k: (v[1] - v[0]) / (steps[1] - steps[0]) for k, v in counts.items()}
    print(f"instructions per decode token (cachegrind, slope {steps[0]}..{steps[1]} steps): "
          f"ours {per['ours']:,.0f}, minimal {per['minimal']:,.0f} -> "
          f"{100 * (per['ours'] / per['minimal'] - 1):+.3f}%")


def main() -> None:
    a = generation_parser(16, 100, 2, generations=20, rounds=7).parse_args()

    from pytest_sme2.api import parse_summary, Generation, RunRequest, native_runner

    pte = tiny_llama_pte(a.pte)
    ours_runner = native_runner()
    with tempfile.TemporaryDirectory() as tmp:
        minimal = build_minimal(Path(tmp))
        req = RunRequest(pte, Path(tmp) / "g.etdump", threads=1, runs=a.generations,
                         warmup=a.warmup, generation=Generation(a.prompt, a.new))
        ours_all, mini_all, ratios = [], [], []
        for r in range(a.rounds):
            done = subprocess.run(ours_runner.command(req), capture_output=True, text=True,
                                  check=True)
            g = parse_summary(done.stdout).generation
            assert g is not None
            ours = statistics.median(g.decode_ms[a.warmup:]) / a.new
            done = subprocess.run([str(minimal), str(pte), str(a.prompt), str(a.new),
                                   str(a.generations), str(a.warmup), str(req.etdump)],
                                  capture_output=True, text=True, check=True)
            line = [s for s in done.stdout.splitlines() if s.startswith("{")][-1]
            mini = statistics.median(json.loads(line)["decode_ms"]) / a.new
            ours_all.append(ours)
            mini_all.append(mini)
            ratios.append(ours / mini - 1)
            print(f"round {r + 1}: ours {1e3 * ours:8.2f} us/token   minimal "
                  f"{1e3 * mini:8.2f} us/token   {100 * (ours / mini - 1):+6.2f}%")
        if shutil.which("valgrind"):
            instructions(ours_runner, minimal, pte, a.prompt, Path(tmp))
    print(f"median per decode token: ours {1e3 * statistics.median(ours_all):.2f} us, minimal "
          f"{1e3 * statistics.median(mini_all):.2f} us")
    print(f"runner overhead per decode token (median of rounds): "
          f"{100 * statistics.median(ratios):+.2f}%  (spread {100 * min(ratios):+.2f}% .. "
          f"{100 * max(ratios):+.2f}%)")


if __name__ == "__main__":
    main()
