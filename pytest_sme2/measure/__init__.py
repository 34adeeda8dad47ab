"""The measurement loop: a session's options (options, option_values, config, settings), the
benchmark matrix (matrix), one block measured (block; an LLM's as a generation: generation), a
runner process read back outside a block (process), interleaved pairs (pairs), the gate's half
of a benchmark (judging), the measure -> confirm -> judge -> record loop as one object
(benchmark), the A/B comparison record (comparison), more blocks until an interval is as narrow
as asked (precision), the session and its cost (session, cost), and the per-block artifacts
(artifacts/: CSV, trace)."""
