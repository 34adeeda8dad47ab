"""The kernel families the aarch64 ExecuTorch wheel carries, as the kernel map places them
(category, ISA family, variant, weights), and the kernels it cannot place: the table of
docs/measurements/wheel-kernels.md.

    python evaluations/wheel_kernels.py [OUT.md]

Reads the exported symbols of the cached wheel's ``libexecutorch_backend_xnnpack.so``
(``pytest-sme2 setup qemu`` caches it), XNNPACK's weight packers included. Prints the table;
with OUT.md, writes it there too.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pytest_sme2.analysis.kernel_map import library_kernels, map_kernels
from pytest_sme2.emulation.wheel import cached_executorch_dir


def table(lib: Path) -> str:
    m = map_kernels(library_kernels(lib, weight_packers=True))
    rows = ["| category | ISA family | variant | weights | kernels | e.g. |",
            "|---|---|---|---|---:|---|"]
    for (category, family, variant, weights), names in m.families().items():
        rows.append(f"| {category} | {family} | `{variant}` | {weights or '-'} | {len(names)} | "
                    f"`{names[0]}` |")
    rows += ["", f"{len(m.placed)} kernels placed; {len(m.unplaced)} listed, not placed:", ""]
    rows += [f"- `{k.name}` ({k.category or 'no category'}; {k.why_not})" for k in m.unplaced]
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    folder = cached_executorch_dir()
    if folder is None:
        sys.exit("the aarch64 wheel is not cached: run `pytest-sme2 setup qemu`")
    text = table(folder / "lib" / "libexecutorch_backend_xnnpack.so")
    print(text, end="")
    if len(sys.argv) > 1:
        Path(sys.argv[1]).write_text(text)
