"""One process of the ``text_llm_runner`` runner (:mod:`.text_llm_runner`): ExecuTorch's
``TextLLMRunner`` from the installed wheel runs ``warmup + runs`` generations of one program,
with ``libpytest_sme2_execute_clock.so`` preloaded (each ``Method::execute`` timed by our clock).

    python -m pytest_sme2.runners.text_llm_child --pte M.pte --generate P,D [--tokenizer T]
        [--data M.ptd] [--threads N] [--warmup W] [--runs R]

Per generation: ``generate(text, GenerationConfig(echo=False, max_new_tokens=D + 1,
temperature=0))`` (its first token comes from the prefill, then D decode steps: the executes of
our runners' ``--generate P,D``), then ``reset()``. It prints our summary line last (the
native runner's keys): ``execute_ms`` from the preloaded clock, the ``generation`` object with
the token ids read back through the generated tokenizer and ``runner_report``, the runner's own
stats in whole milliseconds. Errors: one line on stderr, exit status 1.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import sys
import time
from pathlib import Path

from pytest_sme2.errors import Sme2Error
from pytest_sme2.programs.llm.facts import llm_facts
from pytest_sme2.programs.llm.tokenizer import (PromptText, TokenizerError, minimal_tokenizer,
                                                prompt_text)
from pytest_sme2.results.generation import parse_generate, prompt_token_ids
from pytest_sme2.runners.python_child import (import_runtime, limit_torch_threads,
                                               load_operator_libraries)
from pytest_sme2.runners.python_process import first_line, status_kb

SPAN = "Method::execute() inside ExecuTorch's TextLLMRunner"
RUNNER = "text_llm_runner"
# Its loaders, in the order ExecuTorch's load_tokenizer tries them (llm_runner_helper.cpp).
LOADERS = ("CppHFTokenizer", "CppTiktoken", "CppSPTokenizer", "CppLlama2cTokenizer")


class ChildError(Sme2Error):
    pass


def _clock() -> ctypes.CDLL:
    """The preloaded execute clock (the runner module puts it in LD_PRELOAD)."""
    lib = ctypes.CDLL(None)
    try:
        lib.pytest_sme2_execute_count.restype = ctypes.c_size_t
        lib.pytest_sme2_execute_ms.restype = ctypes.POINTER(ctypes.c_double)
    except AttributeError:
        raise ChildError("libpytest_sme2_execute_clock.so is not preloaded in this process "
                         "(run it through the text_llm_runner runner)") from None
    return lib


def _times(clock: ctypes.CDLL) -> list[float]:
    n = clock.pytest_sme2_execute_count()
    ms = clock.pytest_sme2_execute_ms()
    return [ms[i] for i in range(n)]


def _user_tokenizer_size(path: str, pte: str) -> int:
    """The vocabulary of a user's tokenizer, loaded the way the runner loads it; one line when
    no loader reads it."""
    import pytorch_tokenizers as tokenizers  # the wheel's C++ tokenizers: this process only

    for name in LOADERS if path.endswith(".json") else LOADERS[1:]:
        tokenizer = getattr(tokenizers, name)()
        try:
            tokenizer.load(path)
        except RuntimeError:
            continue
        return int(tokenizer.vocab_size())
    raise ChildError(f"{path}: not a tokenizer ExecuTorch's runner reads (tried "
                     f"{', '.join(LOADERS)}); pass the tokenizer.model, tokenizer.json, "
                     f"tiktoken or tokenizer.bin that {Path(pte).name} was trained with")


def _prompt(a, vocab: int, prompt_tokens: int) -> tuple[str, PromptText | None]:
    """(tokenizer path, what to feed): the generated tokenizer and our prompt exactly, or the
    user's and words (its tokenizer decides the count)."""
    ids = prompt_token_ids(prompt_tokens, vocab)
    if not a.tokenizer:
        return str(minimal_tokenizer(vocab)), prompt_text(ids, vocab)
    size = _user_tokenizer_size(a.tokenizer, a.pte)
    if size > vocab:
        raise ChildError(f"{a.tokenizer}: a tokenizer of {size:,} tokens, but {Path(a.pte).name} "
                         f"has {vocab:,}: it is not this program's tokenizer (pass its own, or "
                         "none for the generated one)")
    return a.tokenizer, None


def _report(stats: list, warmup: int) -> dict:
    """Its own stats per timed generation (whole ms) and their medians."""
    rows = [{"load_ms": s.model_load_end_ms - s.model_load_start_ms,
             "prefill_ms": s.prompt_eval_end_ms - s.inference_start_ms,
             "decode_ms": s.inference_end_ms - s.prompt_eval_end_ms,
             "ttft_ms": s.first_token_ms - s.inference_start_ms,
             "sampling_ms": s.aggregate_sampling_time_ms,
             "prompt_tokens": s.num_prompt_tokens,
             "generated_tokens": s.num_generated_tokens} for s in stats[warmup:]]

    def median(key: str) -> float | None:
        return float(statistics.median(r[key] for r in rows)) if rows else None

    out = {"runner": RUNNER, "stats_resolution_ms": 1, "generations": rows,
           **{k: median(k) for k in ("load_ms", "prefill_ms", "decode_ms", "ttft_ms",
                                     "sampling_ms")}}
    out["prompt_tokens"] = rows[0]["prompt_tokens"] if rows else None
    out["generated_tokens"] = rows[0]["generated_tokens"] if rows else None
    for key, tokens in (("prefill", "prompt_tokens"), ("decode", "generated_tokens")):
        ms = out[f"{key}_ms"]
        # Its own rate: tokens over its whole-ms interval; none when that read 0 ms.
        out[f"{key}_tokens_per_s"] = 1e3 * out[tokens] / ms if ms and out[tokens] else None
    return out


def run(a) -> dict:
    g = parse_generate(a.generate)
    facts = llm_facts(Path(a.pte))
    if facts is None or not facts.vocab_size:
        raise ChildError(f"{a.pte}: not an LLM program with get_vocab_size (ExecuTorch's "
                         "runner needs one)")
    vocab = facts.vocab_size
    tokenizer, fed = _prompt(a, vocab, g.prompt_tokens)
    problem = load_operator_libraries(a.pte)
    if problem:
        raise ChildError(problem)
    runtime = import_runtime()
    runtime._unsafe_reset_threadpool(a.threads)     # before the load, as our runners
    from executorch.extension.llm.runner import (  # executorch: imports torch, this child only
        GenerationConfig, TextLLMRunner)
    import torch  # torch: imported by the runner's module already; its pool is sized here

    limit_torch_threads(torch, a.threads)

    clock = _clock()
    rss_before = status_kb("VmRSS:")
    t0 = time.perf_counter()
    try:
        runner = TextLLMRunner(a.pte, tokenizer, a.data)
        runner.get_vocab_size()
    except RuntimeError as e:
        raise ChildError(f"{a.pte}: ExecuTorch's TextLLMRunner refused it with tokenizer "
                         f"{tokenizer} ({first_line(e)})") from None
    load_ms = (time.perf_counter() - t0) * 1e3
    rss_after = status_kb("VmRSS:")
    clock.pytest_sme2_execute_reset()      # the constant methods its load read
    text = fed.text if fed else " ".join(["hello"] * g.prompt_tokens)
    config = GenerationConfig(echo=False, max_new_tokens=g.new_tokens + 1, temperature=0.0,
                              num_bos=0, num_eos=0)
    stats, tokens, generation_ms, per_generation = [], [], [], []
    for i in range(a.warmup + a.runs):
        pieces: list[str] = []
        before = clock.pytest_sme2_execute_count()
        t = time.perf_counter()
        try:
            runner.generate(text, config, token_callback=pieces.append,
                            stats_callback=stats.append)
        except RuntimeError as e:
            raise ChildError(f"{a.pte}: ExecuTorch's TextLLMRunner failed in generation "
                             f"{i + 1} ({first_line(e)})") from None
        generation_ms.append((time.perf_counter() - t) * 1e3)
        per_generation.append(clock.pytest_sme2_execute_count() - before)
        runner.reset()
        ids = [fed.id_of(p) for p in pieces] if fed else []
        if fed and (None in ids or len(ids) != g.new_tokens + 1):
            raise ChildError(f"{a.pte}: ExecuTorch's TextLLMRunner gave {len(pieces)} pieces "
                             f"({pieces[:4]}...), not the {g.new_tokens + 1} tokens of the "
                             "generated tokenizer asked for")
        if tokens and ids != tokens:
            raise ChildError(f"{a.pte}: generation {i + 1} sampled other tokens than the first "
                             "from the same prompt: the program keeps state across reset()")
        tokens = ids
    if len(set(per_generation)) != 1 or len(stats) != len(per_generation):
        raise ChildError(f"{a.pte}: ExecuTorch's TextLLMRunner made {per_generation} executes "
                         "per generation: not one loop of the same length")
    executes = per_generation[0]
    prompt = len(fed.ids) if fed else int(stats[-1].num_prompt_tokens)
    return {
        "threads": a.threads, "torch_threads": torch.get_num_threads(),
        "executions": sum(per_generation),
        "program_load_ms": load_ms, "method_load_ms": 0.0,
        "rss_before_load_kb": rss_before, "rss_after_load_kb": rss_after,
        "peak_rss_kb": status_kb("VmHWM:"),
        "timing": "untraced", "execute_span": SPAN, "execute_ms": _times(clock),
        "generation": {
            "prompt_tokens": prompt, "new_tokens": g.new_tokens, "warmup": a.warmup,
            "generations": a.warmup + a.runs, "prefill_executes": executes - g.new_tokens,
            "decode_executes": g.new_tokens, "dynamic_shape": bool(facts.enable_dynamic_shape),
            "use_kv_cache": facts.use_kv_cache, "max_seq_len": facts.max_seq_len,
            "max_context_len": facts.max_context_len, "vocab_size": vocab,
            "prompt": list(fed.ids) if fed else [], "tokens": tokens,
            "generation_ms": generation_ms, "runner_report": _report(stats, a.warmup)}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="pytest_sme2.runners.text_llm_child")
    p.add_argument("--pte", required=True)
    p.add_argument("--data")
    p.add_argument("--tokenizer")
    p.add_argument("--generate", required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--runs", type=int, default=5)
    a = p.parse_args(argv)
    try:
        summary = run(a)
    except (Sme2Error, TokenizerError, ValueError) as e:
        sys.stdout.flush()
        print(first_line(e), file=sys.stderr)
        return 1
    # The runner prints through C stdio: flush it before our line, which must come last.
    ctypes.CDLL(None).fflush(None)
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
