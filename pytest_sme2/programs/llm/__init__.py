"""The LLM program modules: ExecuTorch's Llama, a transformers causal LM, the scheme table, the
facts a program's methods give, and the LLM program of the generation loop."""
