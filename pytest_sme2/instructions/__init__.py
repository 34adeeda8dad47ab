"""Instructions per ``Method::execute``, counted under valgrind on the host (``--sme2-measure
instructions``): callgrind's output read (:mod:`.callgrind`) and the count made and judged
(:mod:`.count`). Deterministic where time is noisy; ``docs/instruction-counts.md``."""
