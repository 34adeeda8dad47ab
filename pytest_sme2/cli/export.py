"""``pytest-sme2 export``: a registered or library model exported (or its cached export)."""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

from pytest_sme2.programs.export import export_model     # loaded by the CLI's config anyway
from pytest_sme2.programs.export_output import lines_only
from pytest_sme2.programs.spec import model_label
from pytest_sme2.readers.tensorfile import sidecar


def _export(args: argparse.Namespace) -> int:
    """A registered or library model: export it (or reuse the cache). A .pte: take it as it
    is and make its inputs from forward's metadata (the paths printed are the ones a session
    uses)."""
    exported = export_model(args.model, args.dtype, args.cache_dir, force=args.force,
                            progress=lines_only(lambda msg: print(msg, file=sys.stderr,
                                                                  flush=True)))
    paths = [p for p in (exported.pte, exported.etrecord, exported.inputs,
                         exported.folder / "meta.json") if p.is_file()]
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        stem = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{model_label(args.model)}-{exported.dtype}")
        copies = []
        for src in paths:
            suffix = {"meta.json": ".meta.json", "inputs.bin": ".inputs.bin"}.get(
                src.name, "".join(src.suffixes[-1:]))
            dst = out / f"{stem}{suffix}"
            shutil.copyfile(src, dst)
            if src == exported.inputs and sidecar(src).is_file():   # what the tensors are
                shutil.copyfile(sidecar(src), sidecar(dst))
            copies.append(dst)
        paths = copies
    for p in paths:
        print(p)
    return 0


def add_parser(sub) -> None:
    e = sub.add_parser("export", help="export a registered or library model (or reuse the cached "
                       "export); a .pte: make its inputs from its metadata")
    e.add_argument("model")
    e.add_argument("--dtype", default="fp32")
    e.add_argument("--out", type=Path, help="copy the .pte/.etrecord/meta here")
    e.add_argument("--cache-dir", type=Path)
    e.add_argument("--force", action="store_true", help="export again even on a cache hit")
    e.set_defaults(func=_export)
