"""The measurement loop: a session's options (config, settings), one block measured (block),
the measure -> confirm -> judge -> record loop as one object (benchmark), the A/B comparison
record (comparison), int8 precision checks, the device matrix, the session and its cost, and the
per-block artifacts (CSV, trace)."""
