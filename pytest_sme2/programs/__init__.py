"""Programs: what is exported and how (models, LLM schemes, what a program's methods say)."""
