"""A stand-in for ExecuTorch's ``llama_main`` (examples/models/llama/main.cpp with
extension/llm/runner's TextLLMRunner), which cannot be built here: the wheel ships neither its
sources nor its tokenizer libraries. It keeps the contract our llama_main runner relies on, as
upstream's main (ExecuTorch 1.2+, built with the event tracer) has it:

- gflags: ``--flag value`` or ``--flag=value``; an unknown flag is ``ERROR: unknown command
  line flag 'x'`` and exit status 1;
- the tokenizer file must exist; the prompt is text (here: one token per word);
- one traced program: the constant methods it reads (``enable_dynamic_shape``,
  ``get_max_seq_len``, ``get_max_context_len``, ``use_kv_cache``, ``use_sdpa_with_kv_cache``)
  are executed through it, so each adds an ``Execute`` block to the ETDump;
- ``--warmup``: one generation first, decoding up to ``seq_len`` tokens and stopping at EOS,
  unreported; then positions restart at 0;
- the timed generation: the prompt in one execute where forward's length is dynamic (else one
  per token), greedy at temperature 0, ``max_new_tokens - 1`` decode executes
  (``max_new_tokens = min(seq_len, max_context_len) - prompt tokens``), EOS ignored with
  ``--ignore_eos``;
- one ``PyTorchObserver {json}`` line after it, upstream's keys in upstream's order
  (timestamps in epoch ms), and the ETDump written once at exit to ``--etdump_path``.

The model really runs (the ExecuTorch Python runtime): the ETDump and the timestamps are of real
executes. ``FAKE_LLAMA_MAIN_NO_TRACER=1`` plays a build without the event tracer (no ETDump);
``FAKE_LLAMA_MAIN_1_1=1`` a llama_main of ExecuTorch 1.1, which had no ``--ignore_eos``."""

from __future__ import annotations

import json
import os
import sys
import time

FLAGS = {"model_path": "llama2.pte", "data_paths": "", "tokenizer_path": "tokenizer.bin",
         "prompt": "The answer to the ultimate question is", "prompt_file": "",
         "temperature": "0.8", "seq_len": "128", "max_new_tokens": "-1", "cpu_threads": "-1",
         "num_bos": "0", "num_eos": "0", "warmup": "false", "ignore_eos": "false",
         "etdump_path": "etdump.in", "method_name": "forward"}
BOOLS = {"warmup", "ignore_eos"}
METADATA = ("enable_dynamic_shape", "get_max_seq_len", "get_max_context_len", "use_kv_cache",
            "use_sdpa_with_kv_cache")
EOS = 2


def parse(argv: list[str]) -> dict[str, str]:
    flags = dict(FLAGS)
    if os.environ.get("FAKE_LLAMA_MAIN_1_1") == "1":
        del flags["ignore_eos"]
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, value = arg.lstrip("-").partition("=")
        if not arg.startswith("-") or name not in flags:
            print(f"ERROR: unknown command line flag '{name}'", file=sys.stderr)
            sys.exit(1)
        if not eq:
            if name in BOOLS:
                value = "true"
            else:
                i += 1
                value = argv[i]
        flags[name] = value
        i += 1
    return flags


def now_ms() -> int:
    return int(time.time() * 1000)


def main() -> int:
    f = parse(sys.argv[1:])
    if not os.path.isfile(f["tokenizer_path"]):
        print(f"E tokenizer: failed to load {f['tokenizer_path']}", file=sys.stderr)
        print("E Failed to create llama runner", file=sys.stderr)
        return 1
    import torch
    from executorch.extension.pybindings import portable_lib as runtime

    load_start = now_ms()
    module = runtime._load_for_executorch(f["model_path"], enable_etdump=True,
                                          debug_buffer_size=0)
    have = set(module.method_names())
    meta = {name: int(module.run_method(name, ())[0]) for name in METADATA if name in have}
    load_end = now_ms()
    vocab = 512
    context = meta.get("get_max_context_len", meta.get("get_max_seq_len", 128))
    dynamic = bool(meta.get("enable_dynamic_shape", 1))
    words = f["prompt"].split()
    prompt = [1 + (7919 * i + 13) % (vocab - 1) for i in range(len(words))]
    seq_len = int(f["seq_len"])

    def execute(ids: list[int], pos: int):
        out = module.forward((torch.tensor([ids], dtype=torch.long),
                              torch.tensor([pos], dtype=torch.long)))
        return int(out[0][0, -1].argmax())

    def generate(max_new: int, ignore_eos: bool) -> dict:
        stats = {"inference_start_ms": now_ms()}
        if dynamic:
            token = execute(prompt, 0)
        else:
            for i, t in enumerate(prompt):
                token = execute([t], i)
        stats["prompt_eval_end_ms"] = stats["first_token_ms"] = now_ms()
        pos, generated = len(prompt), 0
        for _ in range(max_new - 1):
            if token == EOS and not ignore_eos:
                break
            token = execute([token], pos)
            pos += 1
            generated += 1
        stats["inference_end_ms"] = now_ms()
        stats["generated_tokens"] = generated
        return stats

    if f["warmup"] == "true":
        generate(min(seq_len, context - len(prompt)), ignore_eos=False)
    max_new = int(f["max_new_tokens"])
    max_new = min(max_new, context - len(prompt)) if max_new > 0 else \
        min(seq_len, context) - len(prompt)
    s = generate(max_new, ignore_eos=f["ignore_eos"] == "true")
    prefill_s = (s["prompt_eval_end_ms"] - s["inference_start_ms"]) / 1000
    decode_s = (s["inference_end_ms"] - s["prompt_eval_end_ms"]) / 1000
    report = {}
    if prefill_s > 0:
        report["prefill_token_per_sec"] = len(prompt) / prefill_s
    if decode_s > 0:
        report["decode_token_per_sec"] = s["generated_tokens"] / decode_s
    report.update({"prompt_tokens": len(prompt), "generated_tokens": s["generated_tokens"],
                   "model_load_start_ms": load_start, "model_load_end_ms": load_end,
                   "inference_start_ms": s["inference_start_ms"],
                   "inference_end_ms": s["inference_end_ms"],
                   "model_execution_start_ms": s["prompt_eval_end_ms"],
                   "model_execution_end_ms": s["inference_end_ms"],
                   "prompt_eval_end_ms": s["prompt_eval_end_ms"],
                   "first_token_ms": s["first_token_ms"], "aggregate_sampling_time_ms": 0,
                   "aggregate_model_execution_time_ms": s["inference_end_ms"]
                   - s["inference_start_ms"], "SCALING_FACTOR_UNITS_PER_SECOND": 1000})
    print("PyTorchObserver " + json.dumps(report, separators=(",", ":")), flush=True)
    if os.environ.get("FAKE_LLAMA_MAIN_NO_TRACER") != "1":
        module.write_etdump_result_to_file(f["etdump_path"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
