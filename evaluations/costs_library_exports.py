"""Export time of library models named by spec (no builder), in the four dtypes, into a
private cache: ``python evaluations/costs_library_exports.py CACHE_DIR [SPEC ...]``.
Prints one JSON line per export (spec, dtype, seconds, delegates, ops left outside).

Measured 2026-11-27 on the 2-core VM while other jobs ran (load average ~5), then host latency
(`pytest benchmarks -k test_latency --sme2-models=... --sme2-threads=1`, native runner, 30 runs;
CVs of 2-180%: the same busy machine) and the SME2 verdict on QEMU (docs/emulated-sme2.md):

| model | dtype | export s | delegates | .pte MB | host median ms | qemu SME2 on / off |
|---|---|---|---|---|---|---|
| mobilevit_small (`?image_size=128`) | fp32 | 120 | 40 | 19.8 | 14.9 | proven / absent |
| | fp16 | 56 | 107 | 14.1 | 41.5 | proven / absent |
| | int8 | 170 | 40 | 5.3 | 7.4 | proven / absent |
| | int8_dynamic | 298 | 153 | 5.3 | 12.5 | proven / absent |
| small MobileViT (tests' SPEC) | fp32 | 95 | 40 | 0.34 | 0.28 | proven / absent |
| | fp16 | 79 | 107 | 0.37 | 0.59 | proven / absent |
| | int8 | 157 | 40 | 0.29 | 0.32 | proven / absent |
| | int8_dynamic | 142 | 155 | 0.32 | 0.41 | proven / absent |
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")   # nothing from a hub: config defaults only

from pytest_sme2.api import export_model  # noqa: E402
from pytest_sme2.programs.export import DTYPES  # noqa: E402

DEFAULT_SPECS = ("transformers:MobileViTModel?image_size=128",)


def main() -> None:
    cache = Path(sys.argv[1])
    for spec in sys.argv[2:] or DEFAULT_SPECS:
        for dtype in DTYPES:
            t0 = time.perf_counter()
            try:
                e = export_model(spec, dtype, cache)
            except Exception as exc:  # noqa: BLE001 - one line per failed export
                print(json.dumps({"spec": spec, "dtype": dtype, "error": str(exc)}), flush=True)
                continue
            print(json.dumps({"spec": spec, "dtype": dtype,
                              "seconds": round(time.perf_counter() - t0, 1),
                              "export_seconds": e.meta.get("export_seconds"),
                              "delegates": e.meta.get("delegates"),
                              "outside": sum(e.meta.get("portable_ops", {}).values()),
                              "pte_mb": round(e.pte.stat().st_size / 1e6, 2),
                              "pte": str(e.pte)}), flush=True)


if __name__ == "__main__":
    main()
