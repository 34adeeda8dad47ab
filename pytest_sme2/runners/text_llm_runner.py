"""ExecuTorch's own LLM runner, from the installed executorch wheel, as a runner:
``text_llm_runner`` (host only). ``executorch.extension.llm.runner.TextLLMRunner`` is the C++
``TextLLMRunner`` that ``llama_main`` wraps, bound to Python; each run is one child process
(:mod:`pytest_sme2.runners.text_llm_child`) that loads it with the program and a tokenizer and
runs the request's generations through its ``generate()``.

Its figures come two ways, kept apart:

- **its own stats** (``extension/llm/runner/stats.h``, handed to a callback): prefill, decode,
  TTFT and load, in **whole milliseconds**. They become the result's ``runner_report``;
- **our clock around each** ``Method::execute`` it makes, from a preloaded library
  (``device_programs/execute_clock.c``), as the native runner times itself: the phases,
  per-token statistics and the decode latency the gate reads.

Nothing traces its operators (the binding takes no event tracer): no ETDump, no breakdown.
A context depth is refused (its ``generate()`` starts every generation at position 0 after
``reset()``).

The tokenizer: the request's generation's (``sme2_generate(..., tokenizer=PATH)``,
``--sme2-tokenizer``), else this runner's (``--runner NAME=text_llm_runner,tokenizer=PATH``),
else one generated for the program's vocabulary (:mod:`pytest_sme2.programs.llm.tokenizer`),
with which it is fed our prompt ids exactly and its tokens are read back as ids.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from pytest_sme2.device_programs.build import build_target_helpers
from pytest_sme2.emulation import EmulationError
from pytest_sme2.results.device import RunnerInfo
from pytest_sme2.runners.base import RunnerBase, RunnerError, RunRequest
from pytest_sme2._util.versions import package_version

KIND = "text_llm_runner"
CHILD = "pytest_sme2.runners.text_llm_child"


@dataclass(frozen=True)
class TextLlmRunner(RunnerBase):
    info: RunnerInfo = field(default_factory=lambda: RunnerInfo(KIND, KIND, {
        "runner": "ExecuTorch TextLLMRunner (executorch wheel)",
        "executorch": package_version("executorch")}))
    tokenizer: Path | None = None       # the runner's own (--runner ...,tokenizer=PATH)
    python: str = sys.executable
    progress: Callable[[str], None] | None = field(default=None, compare=False, repr=False)
    takes_tensor_files = False
    times_untraced = True               # our clock around its executes (execute_clock.c)
    traces = False                      # the binding takes no event tracer: no ETDump
    brings_own_operators = False        # the wheel's, imported by the child

    def _clock(self) -> Path:
        try:
            return build_target_helpers("host", progress=self.progress).execute_clock
        except EmulationError as e:
            raise RunnerError(f"runner {self.info.name!r} times ExecuTorch's runner with a "
                              f"preloaded library, which cannot be built here: {e}") from None

    def command(self, request: RunRequest) -> list[str]:
        g = request.generation
        name = self.info.name
        if g is None:
            raise RunnerError(f"runner {name!r} is ExecuTorch's TextLLMRunner: it runs LLM "
                              "generations only (use sme2_generate, or the native runner for "
                              "a forward pass)")
        if g.depth:
            raise RunnerError(f"runner {name!r} is ExecuTorch's TextLLMRunner: its generate() "
                              f"starts at position 0, so it cannot fill a context depth "
                              f"({g.depth} tokens) first; measure depth 0 with it, or use the "
                              "native or python runner")
        argv = ["env", f"LD_PRELOAD={self._clock()}", self.python, "-m", CHILD,
                "--pte", str(request.pte), "--threads", str(request.threads),
                "--runs", str(request.runs), "--warmup", str(request.warmup),
                "--generate", g.arg]
        if request.data:
            argv += ["--data", str(request.data)]
        tokenizer = g.tokenizer or self.tokenizer
        if tokenizer:
            argv += ["--tokenizer", str(tokenizer)]
        return argv

    def device_files(self) -> list[Path]:
        raise RunnerError(f"runner {self.info.name!r} is ExecuTorch's TextLLMRunner from this "
                          "host's executorch wheel and runs only on the host; on a device use "
                          "the native runner or a llama_main built for it (--runner "
                          "NAME=/path/llama_main,tokenizer=PATH)")
