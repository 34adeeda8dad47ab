"""Export time of library models named by spec (no builder), in the four dtypes, into a
private cache: ``python benchmarks/scripts/library_model_exports.py CACHE_DIR [SPEC ...]``.
Prints one JSON line per export (spec, dtype, seconds, delegates, ops left outside)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")   # nothing from a hub: config defaults only

from pytest_sme2.export import DTYPES, export_model  # noqa: E402

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
