"""What is under test: a model spec (a registered name, a .pte, a library model), the
registry of models, the export recipes (an LLM's quantization schemes among them), the
exported program with its inputs, and what an LLM program's methods say."""
