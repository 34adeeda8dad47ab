"""LLMs measured as generations — the workload SME2 is sold on — per case of the generation
matrix (--sme2-llm-models x --sme2-llm-schemes x --sme2-threads; default tiny_llama, 8da8w, 1
thread; --sme2-threads 1,2 gives the thread-scaling table): a prompt prefilled in one
execute, then greedy decode steps, per run
(--sme2-prompt-tokens, --sme2-new-tokens), at each context depth (--sme2-context-depth 0,32:
the KV cache filled untimed first, as llama-bench's pp64 @ d32 and tg32 @ d32). Reported per
phase: prefill and decode tokens/s, time to first token, categories and which kernels each
phase ran.

On a device with SME2 (--device qemu, a phone whose hwcaps show it) the SME2 pair runs the
same generation with SME2 on and hidden: token ids must agree, and on an emulated CPU the
kernels each phase executed are the evidence, never the timings."""

import pytest


def test_generation(sme2_generate, sme2_llm_case):
    gen = sme2_generate(sme2_llm_case.model, scheme=sme2_llm_case.dtype,
                        threads=sme2_llm_case.threads, depth=sme2_llm_case.depth)
    assert gen.depth == sme2_llm_case.depth and gen.generations >= 1
    assert len(gen.tokens) == gen.new_tokens + 1
    assert gen.prefill.tokens == gen.prompt_tokens and gen.decode.executes == gen.new_tokens
    assert gen.prefill.tokens_per_s > 0 and gen.decode.tokens_per_s > 0
    # Time to first token is the prefill and the first sampling: never less than the prefill.
    assert 0 < gen.prefill.median_ms <= gen.ttft_ms


@pytest.mark.sme2(threads=[1])
def test_generation_sme2(sme2_compare, sme2_off, sme2_on, sme2_capable_device, sme2_llm_case,
                         sme2_emulated):
    cmp = sme2_compare(sme2_off, sme2_on, sme2_llm_case.model, dtype=sme2_llm_case.dtype,
                       threads=sme2_llm_case.threads, depth=sme2_llm_case.depth)
    assert cmp.outputs is not None and cmp.outputs.equal, cmp.outputs   # the same token ids
    on, off = cmp.candidate_blocks[0].generation, cmp.base_blocks[0].generation
    for phase in ("prefill", "decode"):
        masked = off.phase(phase).kernel_evidence
        seen = masked.executed_kernels + masked.sampled_kernels
        assert not any(k.isa_family in ("SME", "SME2") for k in seen), (
            f"{phase}: the SME2-off runner ran SME code: {masked.reason}")
        assert on.phase(phase).kernel_evidence is not None, f"{phase}: no kernel evidence"
    if sme2_emulated:
        return                        # emulated speed is not speed: kernels and tokens only
    assert cmp.decode.speedup.point > 0 and cmp.prefill.speedup.point > 0
