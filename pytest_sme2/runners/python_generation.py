"""The Python runner's generation loop (``--generate P,D[,K[,C]]``), the native runner's
run_generations through the ExecuTorch Python runtime: W + N generations, each an untimed fill
of K tokens (context depth) then a prefill then greedy one-token steps, and the same summary
line (see pytest_sme2.results.generation)."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_sme2.readers.tensorfile import SCALAR_TYPES
from pytest_sme2.runners.python_process import (MachineProbe, Refused, Steps, TimedMethod,
                                                first_line, load_untraced, refusal, status_kb,
                                                untraced_keys, watched_stderr)
from pytest_sme2.results.generation import Generation, context_token_ids, parse_generate

if TYPE_CHECKING:
    from pytest_sme2.results.generation import Generation


def _argmax_last(logits) -> int:
    flat = logits.reshape(-1, logits.shape[-1])
    return int(flat[-1].argmax())


def _finite_last(logits, torch) -> bool:
    """Whether the sampled row holds neither a NaN nor an infinity."""
    return bool(torch.isfinite(logits.reshape(-1, logits.shape[-1])[-1]).all())


@dataclass(frozen=True)
class _Plan:
    """What the program allows a generation (the native runner's ``GenerationPlan``)."""

    gen: Generation
    max_seq_len: int
    max_context_len: int
    vocab: int
    dynamic: bool  # the whole prompt in one forward; else one token per forward
    use_kv_cache: bool
    chunk: int = 1  # the depth fill's tokens per forward

    @property
    def prefill_executes(self) -> int:
        return 1 if self.dynamic else self.gen.prompt_tokens

    @property
    def depth_executes(self) -> int:
        return -(-self.gen.depth // self.chunk)

    @property
    def executes(self) -> int:
        """Forward calls per generation, the depth fill's included."""
        return self.depth_executes + self.prefill_executes + self.gen.new_tokens


_CONSTANT_METHODS = ("get_max_seq_len", "get_max_context_len", "get_vocab_size",
                     "use_kv_cache", "enable_dynamic_shape")
_TIMERS = ("prefill_ms", "first_sampling_ms", "sampling_ms", "decode_ms", "generation_ms")


def _parse_generate(text: str) -> Generation:
    """--generate's PROMPT_TOKENS,NEW_TOKENS[,DEPTH[,DEPTH_CHUNK]], checked before the (slow)
    load."""
    try:
        return parse_generate(text)
    except ValueError as e:
        raise Refused(str(e)) from None


def _constant_values(runtime, pte: str, data: str | None) -> dict[str, int]:
    """export_llama's constant methods (get_max_seq_len, use_kv_cache...) the program has, read
    through an untraced second load: through the traced one they would add Execute blocks."""
    constants = runtime._load_for_executorch(pte, data_path=data, enable_etdump=False)
    have = set(constants.method_names())
    values = {}
    for name in _CONSTANT_METHODS:
        if name in have:
            out = constants.run_method(name, ())
            values[name] = int(out[0]) if out else -1
    return values


def _load_traced(runtime, pte: str, seen: list[str], data: str | None):
    """The traced module, forward's metadata, the timed load and the constant values, with the
    runtime's log watched so that a refusal can name a missing operator."""
    try:
        with watched_stderr(seen):
            t0 = time.perf_counter()
            module = runtime._load_for_executorch(pte, data_path=data, enable_etdump=True,
                                                  debug_buffer_size=0)
            meta = module.method_meta("forward")
            program_load_ms = (time.perf_counter() - t0) * 1e3
            values = _constant_values(runtime, pte, data)
    except Exception as e:  # noqa: BLE001 - the runtime's refusal, reported in one line
        raise refusal(pte, seen, f"{pte}: the ExecuTorch runtime refused the program "
                                  f"({first_line(e)})", data) from None
    return module, meta, program_load_ms, values


def _load_timed(runtime, pte: str, seen: list[str], data: str | None):
    """The untraced program and its forward method (loads timed apart), forward's metadata,
    the summary's load keys and the constant values; a refusal names a missing operator."""
    try:
        program, method, program_ms, method_ms = load_untraced(runtime, pte, seen, data)
        extra = {"program_load_ms": program_ms, "method_load_ms": method_ms,
                 "rss_after_load_kb": status_kb("VmRSS:")}
        with watched_stderr(seen):
            values = _constant_values(runtime, pte, data)
    except Exception as e:  # noqa: BLE001 - the runtime's refusal, reported in one line
        raise refusal(pte, seen, f"{pte}: the ExecuTorch runtime refused the program "
                                 f"({first_line(e)})", data) from None
    return program, method, method.method_meta(), extra, values


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
        raise Refused(f"{pte}: method 'forward' takes ({', '.join(shapes)}), not (tokens "
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
        raise Refused(f"{pte}: forward takes a fixed tokens[1, {upper}] without a dynamic "
                       "sequence length; --generate needs tokens[1, 1] or a dynamic length")
    max_seq = values.get("get_max_seq_len", -1)
    max_ctx = values.get("get_max_context_len", -1)
    vocab = values.get("get_vocab_size", -1)
    if vocab <= 0:
        vocab = int(tuple(meta.output_tensor_meta(0).sizes())[-1])
    context = max_ctx if max_ctx > 0 else max_seq
    if (context > 0 and gen.positions > context) or (dynamic and gen.prompt_tokens > upper):
        chunk = f"; one prefill takes at most {upper} tokens" if dynamic else ""
        depth = f"depth {gen.depth} + " if gen.depth else ""
        raise Refused(f"{pte}: {depth}prompt {gen.prompt_tokens} + new {gen.new_tokens} "
                       f"tokens is over the program's limits (max_seq_len {max_seq}, "
                       f"max_context_len {max_ctx}: {depth}prompt + new tokens <= "
                       f"{context}{chunk})")
    longest = upper if dynamic else 1
    chunk = min(gen.depth_chunk, longest) if gen.depth_chunk else longest
    return _Plan(gen, max_seq, max_ctx, vocab, dynamic, values.get("use_kv_cache") == 1,
                 max(chunk, 1))


def _prompt_steps(plan: _Plan, prompt: list[int], torch) -> list:
    """The prefill's token tensors, built once for every generation: the whole prompt where the
    length is dynamic, else one token per forward."""
    prompt_t = torch.tensor([prompt], dtype=torch.long)
    if plan.dynamic:
        return [prompt_t]
    return [prompt_t[:, i:i + 1] for i in range(plan.gen.prompt_tokens)]


def _leak_line(pte: str, g: int, tokens: list[int], first_tokens: list[int]) -> str:
    """Why a generation that sampled other tokens than the first makes the timings worthless."""
    k = next(i for i, (x, y) in enumerate(zip(tokens, first_tokens)) if x != y)
    return (f"{pte}: generation {g + 1} sampled other tokens than generation 1 from the same "
            f"prompt (token {k + 1}: {tokens[k]} vs {first_tokens[k]}): the program does not "
            "reset its KV cache between generations, so its timings would not measure one "
            "generation; nothing was measured")


@dataclass
class _Generations:
    """The generation loop over one program (the native runner's run_generations and
    generate_once): ``torch``, what the program allows (``plan``), the prompt's token ids,
    the program's path and the runtime's log so far (``seen``, where it names a missing
    operator)."""

    torch: Any
    plan: _Plan
    prompt: list[int]
    pte: str
    seen: list[str]
    fill: list[int]     # the depth fill's token ids (none at depth 0)

    def run(self, forward, total: int, record: Steps):
        """``total`` generations through ``forward``. Each must sample the first's tokens: the
        same prompt from position 0 gives the same tokens unless state leaks between
        generations. Returns the timers, the first generation's tokens and the RSS after
        it."""
        steps = _prompt_steps(self.plan, self.prompt, self.torch)
        fill_t = self.torch.tensor([self.fill], dtype=self.torch.long)
        fill = [fill_t[:, i:i + self.plan.chunk] for i in range(0, len(self.fill),
                                                                 self.plan.chunk)]
        timers: dict[str, list[float]] = {k: [] for k in _TIMERS}
        first_tokens: list[int] | None = None
        rss_after_load = None
        for g in range(total):
            tokens, times = self.once(forward, fill, steps, g, total, record)
            if g == 0:
                rss_after_load = status_kb("VmRSS:")
                first_tokens = tokens
            elif tokens != first_tokens:
                raise Refused(_leak_line(self.pte, g, tokens, first_tokens))
            for key, v in zip(timers, times):
                timers[key].append(v)
        return timers, first_tokens, rss_after_load

    def once(self, forward, fill: list, steps: list, g: int, total: int,
             record: Steps) -> tuple[list[int], tuple[float, ...]]:
        """One generation: the depth fill (untimed by the timers; ``forward`` may time each
        call), the prefill, then greedy one-token steps, each a ``forward`` call. Returns the
        sampled tokens and the times named by _TIMERS, timed as natively; the first
        generation's non-finite steps are counted in ``record``."""
        torch, plan, pte, seen = self.torch, self.plan, self.pte, self.seen
        clock = time.perf_counter
        tokens: list[int] = []
        pos = 0

        def sample(logits) -> None:
            tokens.append(_argmax_last(logits))
            if g == 0 and not _finite_last(logits, torch):  # checked in the first generation only
                record.nonfinite += 1

        try:
            for chunk_t in fill:    # the context depth: positions 0 .. K - 1, untimed
                if g == 0 and pos == 0:  # this runtime loads the method here: watch its log
                    with watched_stderr(seen):
                        forward((chunk_t, torch.tensor([pos], dtype=torch.long)))
                else:
                    forward((chunk_t, torch.tensor([pos], dtype=torch.long)))
                pos += chunk_t.shape[1]
            t0 = clock()
            for chunk_t in steps:
                if g == 0 and pos == 0:  # this runtime loads the method here: watch its log
                    with watched_stderr(seen):
                        out = forward((chunk_t, torch.tensor([pos], dtype=torch.long)))
                else:
                    out = forward((chunk_t, torch.tensor([pos], dtype=torch.long)))
                pos += chunk_t.shape[1]
            prefill_ms = (clock() - t0) * 1e3
            s0 = clock()
            sample(out[0])
            first_ms = sampling = (clock() - s0) * 1e3
            d0 = clock()
            for _ in range(plan.gen.new_tokens):
                out = forward((torch.tensor([[tokens[-1]]], dtype=torch.long),
                               torch.tensor([pos], dtype=torch.long)))
                pos += 1
                s0 = clock()
                sample(out[0])
                sampling += (clock() - s0) * 1e3
            decode_ms = (clock() - d0) * 1e3
            whole_ms = (clock() - t0) * 1e3
        except Exception as e:  # noqa: BLE001 - reported in one line
            raise refusal(pte, seen, f"{pte}: generation {g + 1} of {total} failed at position "
                                      f"{pos} ({first_line(e)})") from None
        return tokens, (prefill_ms, first_ms, sampling, decode_ms, whole_ms)


def _generation_summary(a, plan: _Plan, prompt: list[int], tokens, timers,
                        nonfinite: int) -> dict:
    """The summary line's "generation" object, key for key the native runner's."""
    gen = plan.gen
    return {"prompt_tokens": gen.prompt_tokens, "new_tokens": gen.new_tokens,
            "warmup": a.warmup, "generations": a.warmup + a.runs,
            "prefill_executes": plan.prefill_executes, "decode_executes": gen.new_tokens,
            "depth": gen.depth, "depth_executes": plan.depth_executes,
            "dynamic_shape": plan.dynamic, "use_kv_cache": plan.use_kv_cache,
            "max_seq_len": plan.max_seq_len, "max_context_len": plan.max_context_len,
            "vocab_size": plan.vocab, "prompt": prompt, "tokens": tokens,
            "nonfinite_steps": nonfinite, **timers}


def generate(a, runtime, torch, rss_before_load, probe: MachineProbe) -> int:
    """The generation loop through the runtime (see pytest_sme2.results.generation): W + N
    generations, each a prefill then greedy one-token steps; the same summary line as the
    native runner's --generate. A refusal at any step is one line on stderr, status 1. With
    --trace-runs, the timed generations run untraced (each execute timed alone), then the
    traced ones on the program loaded again with the tracer."""

    seen: list[str] = []  # the runtime's log, where it names a missing operator
    try:
        gen = _parse_generate(a.generate)
        if a.trace_runs < 0:
            module, meta, program_load_ms, values = _load_traced(runtime, a.pte, seen, a.data)
            extra = {"program_load_ms": program_load_ms, "rss_after_load_includes": "first run"}
        else:
            program, method, meta, extra, values = _load_timed(runtime, a.pte, seen, a.data)
        plan = _plan_generation(a.pte, meta, values, gen)
        fill, prompt = context_token_ids(gen.depth, gen.prompt_tokens, plan.vocab)
        timed = Steps([])
        loop = _Generations(torch, plan, prompt, a.pte, seen, fill)
        probe.before()
        if a.trace_runs < 0:
            timers, tokens, extra["rss_after_load_kb"] = loop.run(
                module.forward, a.warmup + a.runs, timed)
            probe.after()
            module.write_etdump_result_to_file(a.etdump)
            peak = status_kb("VmHWM:")
        else:
            timers, tokens, _ = loop.run(TimedMethod(method, timed).forward,
                                         a.warmup + a.runs, timed)
            probe.after()
            peak = status_kb("VmHWM:")  # before the traced pass adds its own
            del method, program
            traced = (a.trace_warmup + a.trace_runs) * plan.executes
            if a.trace_runs > 0:
                module = _load_traced(runtime, a.pte, seen, a.data)[0]
                loop.run(module.forward, a.trace_warmup + a.trace_runs, Steps([]))
                module.write_etdump_result_to_file(a.etdump)
            extra.update(untraced_keys(a, timed, traced if a.trace_runs > 0 else 0))
    except Refused as e:
        print(str(e), file=sys.stderr)
        return 1
    summary = {
        "threads": int(runtime._threadpool_get_thread_count()),
        "torch_threads": torch.get_num_threads(),     # the custom ops' BLAS pool
        "executions": (a.warmup + a.runs) * plan.executes,
        "rss_before_load_kb": rss_before_load,
        "peak_includes": "the Python interpreter, torch and the runtime extension",
        "peak_rss_kb": peak, **extra, **probe.keys()}
    summary["generation"] = _generation_summary(a, plan, prompt, tokens, timers,
                                                timed.nonfinite)
    print(json.dumps(summary))
    return 0
