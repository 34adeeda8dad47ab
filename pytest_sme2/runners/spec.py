"""Runner specs: ``--runner NAME=SPEC`` (repeatable) or the ``sme2_runners`` ini list.

    python                                  the ExecuTorch Python runtime (name "python")
    native                                  our C++ runner, built on demand (name "native")
    fast=native                             the same under another name
    sme2_on=/path/executor_runner,sme2=on   a user binary with build labels
    sme2_off=/path/runner,libs=/path/lib,sme2=off,flags=-DXNNPACK_ENABLE_ARM_SME2=OFF

After the kind or path, comma-separated ``key=value`` pairs are labels recorded with every
result, except ``libs=DIR`` (shared libraries pushed beside a binary on a remote device).
The runner itself is made on first use, so a native build only happens when one is needed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from pytest_sme2.runners.base import Runner, RunnerError

BUILTIN = ("python", "native")
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


@dataclass(frozen=True)
class RunnerSpec:
    name: str
    kind: str                          # python | native | binary
    path: Path | None = None
    lib_dir: Path | None = None
    labels: dict[str, str] = field(default_factory=dict)

    def make(self, progress: Callable[[str], None] | None = None) -> Runner:
        if self.kind == "python":
            from pytest_sme2.runners.base import RunnerInfo
            from pytest_sme2.runners.python import PythonRunner

            base = PythonRunner()
            return PythonRunner(info=RunnerInfo(self.name, "python",
                                                {**base.info.labels, **self.labels}))
        if self.kind == "native":
            from pytest_sme2.runners.native import NativeRunner, build_native_runner

            runner = NativeRunner.from_build(build_native_runner(progress=progress), self.name)
            if self.labels:
                info = type(runner.info)(self.name, "native", {**runner.info.labels,
                                                                **self.labels})
                runner = NativeRunner(runner.binary, info, runner.libs)
            return runner
        from pytest_sme2.runners.binary import BinaryRunner

        return BinaryRunner(self.name, self.path, self.lib_dir, dict(self.labels))


def parse_runner_spec(text: str) -> RunnerSpec:
    """Parse one ``[NAME=]SPEC`` string; errors name the spec and show the expected form."""
    raw = text.strip()
    usage = ("expected NAME=python, NAME=native or NAME=/path/to/executor_runner"
             "[,libs=DIR][,label=value...]")
    if not raw:
        raise RunnerError(f"empty --runner spec; {usage}")
    head, *rest = raw.split(",")
    if "=" in head:
        name, target = head.split("=", 1)
    elif "/" in head:  # a bare path: named after the file
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(head).name).strip("_") or "binary"
        target = head
    else:
        name, target = head, head
    name, target = name.strip(), target.strip()
    if not name or not _NAME.match(name):
        raise RunnerError(f"--runner {text!r}: the name {name!r} must be letters, digits, "
                          f"'_', '.' or '-'; {usage}")
    if not target:
        raise RunnerError(f"--runner {text!r}: nothing after '='; {usage}")
    labels: dict[str, str] = {}
    lib_dir = None
    for item in rest:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise RunnerError(f"--runner {text!r}: {item!r} is not key=value; {usage}")
        if key.strip() == "libs":
            lib_dir = Path(value.strip()).expanduser()
        else:
            labels[key.strip()] = value.strip()
    if target in BUILTIN:
        if lib_dir is not None:
            raise RunnerError(f"--runner {text!r}: libs= applies to a binary path only")
        return RunnerSpec(name, target, labels=labels)
    if "/" not in target and not target.startswith("."):
        raise RunnerError(f"--runner {text!r}: {target!r} is neither a built-in runner "
                          f"({', '.join(BUILTIN)}) nor a path; {usage}")
    return RunnerSpec(name, "binary", Path(target).expanduser(), lib_dir, labels)


def runner_specs(texts: list[str]) -> dict[str, RunnerSpec]:
    """The configured runners by name: the built-ins, then the user's (which may override)."""
    specs = {name: RunnerSpec(name, name) for name in BUILTIN}
    seen: set[str] = set()
    for text in texts:
        spec = parse_runner_spec(text)
        if spec.name in seen:
            raise RunnerError(f"--runner {text!r}: a runner named {spec.name!r} is already "
                              "configured")
        seen.add(spec.name)
        specs[spec.name] = spec
    return specs
