"""Child process of the python runner: size the thread pool, load with ETDump on, run warm-up +
timed executions, write the ETDump (and the last outputs). Errors: one line on stderr, status 1.
Success ends with the same JSON summary line as the native runner (pytest_sme2.runners.base)."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from pytest_sme2.readers.tensorfile import SCALAR_TYPES, read_tensors, write_tensors

if TYPE_CHECKING:
    from pytest_sme2.results.generation import Generation


def _inputs_from_meta(meta) -> list[np.ndarray]:
    """Seeded inputs shaped from the program's own metadata, when no inputs file is given."""
    rng = np.random.default_rng(0)
    out = []
    for i in range(meta.num_inputs()):
        info = meta.input_tensor_meta(i)
        dtype = SCALAR_TYPES.get(int(info.dtype()))
        if dtype is None:
            raise SystemExit(f"input {i} has ExecuTorch scalar type {int(info.dtype())}; "
                             "pass an inputs file")
        out.append(rng.standard_normal(tuple(info.sizes())).astype(dtype))
    return out


def program_problem(path: str) -> str | None:
    """Why ``path`` cannot be an ExecuTorch program, judged from its header before the (slow)
    runtime import; None if it may be one. The runtime itself logs a foreign header's bytes,
    which aborts the Python runtime when they are not UTF-8."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
    except FileNotFoundError:
        return f"{path}: no such .pte file"
    except OSError as e:
        return f"{path}: cannot read the .pte file ({e.strerror})"
    if not head:
        return f"{path}: empty .pte file, not an ExecuTorch program (export it again)"
    if len(head) < 8 or head[4:6] != b"ET" or not head[6:8].isdigit():
        return (f"{path}: not an ExecuTorch program (no 'ETnn' identifier in its header; "
                "export it again)")
    return None


def import_runtime() -> ModuleType:
    """The ExecuTorch runtime extension, imported directly: the package's ``portable_lib``
    wrapper imports ``executorch.exir`` (and through it torchao) only to issue an "experimental
    API" warning, which costs seconds more per process (~1.3 s -> ~4-9 s here) and prints
    torchao's "Failed to load ..._C_mxfp8" lines. torch comes first: it loads libtorch, whose
    symbols the extension needs. Importing creates no runtime state (no pool, no program)."""
    # Import-time warnings (missing CUDA extras, deprecations) would fill the stderr tail a
    # failure is reported with, if the fallback below imports torchao.
    for name in ("torchao", "torch.utils._pytree"):
        logging.getLogger(name).setLevel(logging.ERROR)
    import torch  # noqa: F401 - before the extension, see above

    try:
        from executorch.extension.pybindings import _C as runtime
    except ImportError:  # a layout without the bare extension: the public wrapper
        from executorch.extension.pybindings import portable_lib as runtime
    return runtime


def status_kb(field: str) -> int | None:
    """A ``VmRSS:`` / ``VmHWM:`` value of /proc/self/status in kB; None where there is none."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field):
                    return int(line[len(field):].split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _first_line(e: BaseException) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


_MISSING_OP = re.compile(r"Missing operator: (?:\[\d+\] )?(\S+)")


def missing_operator_line(pte: str, method: str, ops: list[str]) -> str:
    """The one line for a program that needs operators this runtime does not register (the
    native runner words it the same way)."""
    ops = list(dict.fromkeys(ops))  # each once, in the order the runtime named them
    names = ", ".join(ops[:4])
    line = (f"{pte}: method '{method}' needs operator{'s' if len(ops) > 1 else ''} {names}, "
            "which this runner (built against the ExecuTorch wheel) does not register")
    if "llama::" in names:
        return line + ("; export with plain attention (export_llama -kv without "
                       "--use_sdpa_with_kv_cache) to run it here, or run it with a llama_main "
                       "built with ExecuTorch's custom LLM ops")
    return line + "; export without it, or use a runner built with the library that registers it"


@contextlib.contextmanager
def _watched_stderr(seen: list[str]):
    """The runtime's log (C stdio on fd 2) copied into ``seen`` and still written to stderr:
    it names a missing operator only there."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            text = tmp.read().decode(errors="replace")
            seen.append(text)
            sys.stderr.write(text)
            sys.stderr.flush()


def _argmax_last(logits) -> int:
    flat = logits.reshape(-1, logits.shape[-1])
    return int(flat[-1].argmax())


class _Refused(Exception):
    """A --generate failure: one line on stderr and status 1, printed once by :func:`_generate`
    (the native runner's ``Failure``), so that the pieces below can stop it from any depth."""


@dataclass(frozen=True)
class _Plan:
    """What the program allows a generation (the native runner's ``GenerationPlan``)."""

    gen: Generation
    max_seq_len: int
    max_context_len: int
    vocab: int
    dynamic: bool  # the whole prompt in one forward; else one token per forward
    use_kv_cache: bool

    @property
    def prefill_executes(self) -> int:
        return 1 if self.dynamic else self.gen.prompt_tokens


_CONSTANT_METHODS = ("get_max_seq_len", "get_max_context_len", "get_vocab_size",
                     "use_kv_cache", "enable_dynamic_shape")
_TIMERS = ("prefill_ms", "first_sampling_ms", "sampling_ms", "decode_ms", "generation_ms")


def _parse_generate(text: str) -> Generation:
    """--generate's PROMPT_TOKENS,NEW_TOKENS, checked before the (slow) load."""
    from pytest_sme2.results.generation import Generation

    p_tokens, _, d_tokens = text.partition(",")
    try:
        return Generation(int(p_tokens), int(d_tokens))
    except ValueError:
        raise _Refused(f"--generate: {text!r} is not PROMPT_TOKENS,NEW_TOKENS "
                       "(e.g. 64,32)") from None


def _refusal(pte: str, seen: list[str], otherwise: str) -> _Refused:
    """The runtime's log names a missing operator only on stderr: that line when it did (it
    says what to do), else ``otherwise``."""
    ops = _MISSING_OP.findall("".join(seen))
    return _Refused(missing_operator_line(pte, "forward", ops) if ops else otherwise)


def _constant_values(runtime, pte: str) -> dict[str, int]:
    """export_llama's constant methods (get_max_seq_len, use_kv_cache...) the program has, read
    through an untraced second load: through the traced one they would add Execute blocks."""
    constants = runtime._load_for_executorch(pte, enable_etdump=False)
    have = set(constants.method_names())
    values = {}
    for name in _CONSTANT_METHODS:
        if name in have:
            out = constants.run_method(name, ())
            values[name] = int(out[0]) if out else -1
    return values


def _load_traced(runtime, pte: str, seen: list[str]):
    """The traced module, forward's metadata, the timed load and the constant values, with the
    runtime's log watched so that a refusal can name a missing operator."""
    try:
        with _watched_stderr(seen):
            t0 = time.perf_counter()
            module = runtime._load_for_executorch(pte, enable_etdump=True, debug_buffer_size=0)
            meta = module.method_meta("forward")
            program_load_ms = (time.perf_counter() - t0) * 1e3
            values = _constant_values(runtime, pte)
    except Exception as e:  # noqa: BLE001 - the runtime's refusal, reported in one line
        raise _refusal(pte, seen, f"{pte}: the ExecuTorch runtime refused the program "
                                  f"({_first_line(e)})") from None
    return module, meta, program_load_ms, values


def _forward_upper_bound(pte: str, meta) -> int:
    """forward must be (tokens int64[1, n], input_pos int64[1]), as export_llama -kv makes it:
    anything else is not an LLM this loop can drive. Returns n's upper bound."""
    shapes = []
    fits = meta.num_inputs() == 2
    for i in range(meta.num_inputs()):
        info = meta.input_tensor_meta(i)
        sizes = tuple(info.sizes())
        dtype = SCALAR_TYPES.get(int(info.dtype()), "?")
        shapes.append(f"{dtype}{list(sizes)}")
        fits = fits and dtype == "int64" and len(sizes) == (2 if i == 0 else 1) and sizes[0] == 1
    if not fits:
        raise _Refused(f"{pte}: method 'forward' takes ({', '.join(shapes)}), not (tokens "
                       "int64[1, n], input_pos int64[1]); --generate needs an LLM exported "
                       "with a KV cache (export_llama -kv)")
    return int(tuple(meta.input_tensor_meta(0).sizes())[1])


def _plan_generation(pte: str, meta, values: dict[str, int], gen: Generation) -> _Plan:
    """The native runner's plan_generation: refuse, before anything runs, a program whose
    forward, sequence length or context cannot take this generation."""
    upper = _forward_upper_bound(pte, meta)
    flag = values.get("enable_dynamic_shape", -1)
    dynamic = flag == 1 or (flag == -1 and upper > 1)
    if not dynamic and upper != 1:
        raise _Refused(f"{pte}: forward takes a fixed tokens[1, {upper}] without a dynamic "
                       "sequence length; --generate needs tokens[1, 1] or a dynamic length")
    max_seq = values.get("get_max_seq_len", -1)
    max_ctx = values.get("get_max_context_len", -1)
    vocab = values.get("get_vocab_size", -1)
    if vocab <= 0:
        vocab = int(tuple(meta.output_tensor_meta(0).sizes())[-1])
    context = max_ctx if max_ctx > 0 else max_seq
    if (context > 0 and gen.positions > context) or (dynamic and gen.prompt_tokens > upper):
        chunk = f"; one prefill takes at most {upper} tokens" if dynamic else ""
        raise _Refused(f"{pte}: prompt {gen.prompt_tokens} + new {gen.new_tokens} tokens is "
                       f"over the program's limits (max_seq_len {max_seq}, max_context_len "
                       f"{max_ctx}: prompt + new tokens <= {context}{chunk})")
    return _Plan(gen, max_seq, max_ctx, vocab, dynamic, values.get("use_kv_cache") == 1)


def _prompt_steps(plan: _Plan, prompt: list[int], torch) -> list:
    """The prefill's token tensors, built once for every generation: the whole prompt where the
    length is dynamic, else one token per forward."""
    prompt_t = torch.tensor([prompt], dtype=torch.long)
    if plan.dynamic:
        return [prompt_t]
    return [prompt_t[:, i:i + 1] for i in range(plan.gen.prompt_tokens)]


def _generate_once(module, torch, plan: _Plan, steps: list, g: int, total: int,
                   pte: str, seen: list[str]) -> tuple[list[int], tuple[float, ...]]:
    """One generation (the native runner's generate_once): the prefill, then greedy one-token
    steps. Returns the sampled tokens and the times named by _TIMERS, timed as natively."""
    clock = time.perf_counter
    tokens: list[int] = []
    pos = 0
    try:
        t0 = clock()
        for chunk_t in steps:
            if g == 0 and pos == 0:  # this runtime loads the method here: watch its log
                with _watched_stderr(seen):
                    out = module.forward((chunk_t, torch.tensor([pos], dtype=torch.long)))
            else:
                out = module.forward((chunk_t, torch.tensor([pos], dtype=torch.long)))
            pos += chunk_t.shape[1]
        prefill_ms = (clock() - t0) * 1e3
        s0 = clock()
        tokens.append(_argmax_last(out[0]))
        first_ms = sampling = (clock() - s0) * 1e3
        d0 = clock()
        for _ in range(plan.gen.new_tokens):
            out = module.forward((torch.tensor([[tokens[-1]]], dtype=torch.long),
                                  torch.tensor([pos], dtype=torch.long)))
            pos += 1
            s0 = clock()
            tokens.append(_argmax_last(out[0]))
            sampling += (clock() - s0) * 1e3
        decode_ms = (clock() - d0) * 1e3
        whole_ms = (clock() - t0) * 1e3
    except Exception as e:  # noqa: BLE001 - reported in one line
        raise _refusal(pte, seen, f"{pte}: generation {g + 1} of {total} failed at position "
                                  f"{pos} ({_first_line(e)})") from None
    return tokens, (prefill_ms, first_ms, sampling, decode_ms, whole_ms)


def _leak_line(pte: str, g: int, tokens: list[int], first_tokens: list[int]) -> str:
    """Why a generation that sampled other tokens than the first makes the timings worthless."""
    k = next(i for i, (x, y) in enumerate(zip(tokens, first_tokens)) if x != y)
    return (f"{pte}: generation {g + 1} sampled other tokens than generation 1 from the same "
            f"prompt (token {k + 1}: {tokens[k]} vs {first_tokens[k]}): the program does not "
            "reset its KV cache between generations, so its timings would not measure one "
            "generation; nothing was measured")


def _run_generations(module, torch, plan: _Plan, prompt: list[int], a, seen: list[str]):
    """W + N generations (the native runner's run_generations). Each must sample the first's
    tokens: the same prompt from position 0 gives the same tokens unless state leaks between
    generations. Returns the timers, the first generation's tokens and the RSS after it."""
    steps = _prompt_steps(plan, prompt, torch)
    total = a.warmup + a.runs
    timers: dict[str, list[float]] = {k: [] for k in _TIMERS}
    first_tokens: list[int] | None = None
    rss_after_load = None
    for g in range(total):
        tokens, times = _generate_once(module, torch, plan, steps, g, total, a.pte, seen)
        if g == 0:
            rss_after_load = status_kb("VmRSS:")
            first_tokens = tokens
        elif tokens != first_tokens:
            raise _Refused(_leak_line(a.pte, g, tokens, first_tokens))
        for key, v in zip(timers, times):
            timers[key].append(v)
    return timers, first_tokens, rss_after_load


def _generation_summary(a, plan: _Plan, prompt: list[int], tokens, timers) -> dict:
    """The summary line's "generation" object, key for key the native runner's."""
    gen = plan.gen
    return {"prompt_tokens": gen.prompt_tokens, "new_tokens": gen.new_tokens,
            "warmup": a.warmup, "generations": a.warmup + a.runs,
            "prefill_executes": plan.prefill_executes, "decode_executes": gen.new_tokens,
            "dynamic_shape": plan.dynamic, "use_kv_cache": plan.use_kv_cache,
            "max_seq_len": plan.max_seq_len, "max_context_len": plan.max_context_len,
            "vocab_size": plan.vocab, "prompt": prompt, "tokens": tokens, **timers}


def _generate(a, runtime, torch, rss_before_load) -> int:
    """The generation loop through the runtime (see pytest_sme2.results.generation): W + N
    generations, each a prefill then greedy one-token steps; the same summary line as the
    native runner's --generate. A refusal at any step is one line on stderr, status 1."""
    from pytest_sme2.results.generation import prompt_token_ids

    seen: list[str] = []  # the runtime's log, where it names a missing operator
    try:
        gen = _parse_generate(a.generate)
        module, meta, program_load_ms, values = _load_traced(runtime, a.pte, seen)
        plan = _plan_generation(a.pte, meta, values, gen)
        prompt = prompt_token_ids(gen.prompt_tokens, plan.vocab)
        timers, tokens, rss_after_load = _run_generations(module, torch, plan, prompt, a, seen)
    except _Refused as e:
        print(str(e), file=sys.stderr)
        return 1
    module.write_etdump_result_to_file(a.etdump)
    total = a.warmup + a.runs
    print(json.dumps({
        "threads": int(runtime._threadpool_get_thread_count()),
        "executions": total * (plan.prefill_executes + gen.new_tokens),
        "program_load_ms": program_load_ms, "rss_before_load_kb": rss_before_load,
        "rss_after_load_kb": rss_after_load, "rss_after_load_includes": "first run",
        "peak_includes": "the Python interpreter, torch and the runtime extension",
        "peak_rss_kb": status_kb("VmHWM:"),
        "generation": _generation_summary(a, plan, prompt, tokens, timers)}))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="pytest_sme2.runners.python_child")
    p.add_argument("--pte", required=True)
    p.add_argument("--etdump", required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--inputs")
    p.add_argument("--outputs")
    p.add_argument("--generate", help="PROMPT_TOKENS,NEW_TOKENS: an LLM generation per run")
    a = p.parse_args(argv)
    problem = program_problem(a.pte)
    if problem:
        print(problem, file=sys.stderr)
        return 1

    import torch

    runtime = import_runtime()
    runtime._unsafe_reset_threadpool(a.threads)  # before the load, never after
    rss_before_load = status_kb("VmRSS:")
    if a.generate:
        return _generate(a, runtime, torch, rss_before_load)
    try:
        t0 = time.perf_counter()
        module = runtime._load_for_executorch(a.pte, enable_etdump=True, debug_buffer_size=0)
        # The load is lazy: a program the runtime refuses fails here, not above.
        meta = module.method_meta("forward")
        program_load_ms = (time.perf_counter() - t0) * 1e3
    except Exception as e:  # noqa: BLE001 - the runtime's refusal, reported in one line
        print(f"{a.pte}: the ExecuTorch runtime refused the program ({_first_line(e)})",
              file=sys.stderr)
        return 1
    arrays = read_tensors(a.inputs) if a.inputs else _inputs_from_meta(meta)
    inputs = tuple(torch.from_numpy(np.array(x)) for x in arrays)
    outputs = None
    total = a.warmup + a.runs
    rss_after_load = None
    for i in range(total):
        try:
            outputs = module.forward(inputs)
        except Exception as e:  # noqa: BLE001 - reported in one line
            print(f"{a.pte}: execution {i + 1} of {total} failed ({_first_line(e)})",
                  file=sys.stderr)
            return 1
        if i == 0:  # this runtime loads the method in the first forward(): no earlier point
            rss_after_load = status_kb("VmRSS:")
    module.write_etdump_result_to_file(a.etdump)
    if a.outputs and outputs is not None:
        write_tensors(a.outputs, [o.detach().numpy() for o in outputs if torch.is_tensor(o)])
    # The method load is timed by the runtime itself (Program::load_method in the ETDump):
    # there is no separate method_load_ms here, and rss_after_load_kb includes the first run.
    print(json.dumps({"threads": int(runtime._threadpool_get_thread_count()),
                      "executions": a.warmup + a.runs, "program_load_ms": program_load_ms,
                      "rss_before_load_kb": rss_before_load,
                      "rss_after_load_kb": rss_after_load, "rss_after_load_includes": "first run",
                      "peak_includes": "the Python interpreter, torch and the runtime extension",
                      "peak_rss_kb": status_kb("VmHWM:")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
