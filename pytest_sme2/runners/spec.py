"""Runner specs: ``--runner NAME=SPEC`` (repeatable) or the ``sme2_runners`` ini list.

    python                                  the ExecuTorch Python runtime (name "python")
    native                                  our C++ runner, built on demand (name "native")
    text_llm_runner[,tokenizer=PATH]        ExecuTorch's own LLM runner from the wheel
                                            (TextLLMRunner; host only, generations only)
    fast=native                             the same under another name
    sme2_on=/path/executor_runner,sme2=on   a user binary with build labels
    sme2_off=/path/runner,libs=/path/lib,sme2=off,flags=-DXNNPACK_ENABLE_ARM_SME2=OFF
    sme2_off=native,mask=sme                the same binary as sme2_on, SME/SME2 hidden from it
    llm=/path/llama_main,tokenizer=/path/tokenizer.model
                                            ExecuTorch's LLM runner (kind "llama_main"; a
                                            binary named llama_main* or given tokenizer=)

After the kind or path, comma-separated ``key=value`` pairs are labels recorded with every
result, except ``libs=DIR`` (shared libraries pushed beside a binary on a remote device) and
``mask=sme|sme2`` (the device hides those CPU features from the runner's process: SME2 off in
one binary, :mod:`pytest_sme2.device_programs.hwcaps`; it implies the label ``sme2=off`` and
records how). The
native runner is one build with SME2 kernels, so ``native,sme2=off`` means ``mask=sme``.
The runner itself is made on first use, so a native build only happens when one is needed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Collection

from pytest_sme2.device_programs.hwcaps import MASKS, describe_mask
from pytest_sme2.programs.llm.tokenizer import TokenizerError, check_tokenizer_path
from pytest_sme2.runners.base import Runner, RunnerError, with_defaults
from pytest_sme2.runners.binary import BinaryRunner
from pytest_sme2.runners.llama_main import LlamaMainRunner, is_llama_main
from pytest_sme2.runners.native import NativeRunner, build_native_runner
from pytest_sme2.runners.python import PythonRunner
from pytest_sme2.runners.text_llm_runner import TextLlmRunner
from pytest_sme2.results.device import RunnerInfo

if TYPE_CHECKING:
    from pluggy import HookRelay

_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
Progress = Callable[[str], None] | None


@dataclass(frozen=True)
class RunnerSpec:
    name: str
    kind: str                          # a KINDS name (python, native, binary...) or a plugin's
    path: Path | None = None
    lib_dir: Path | None = None
    labels: dict[str, str] = field(default_factory=dict)
    hwcap_mask: str | None = None      # a pytest_sme2.device_programs.hwcaps.MASKS name
    tokenizer: Path | None = None      # a llama_main's tokenizer

    def check_files(self, base: Path, given: str) -> None:
        """A binary's path (a llama_main's tokenizer, a libs= folder) that does not exist is
        one line when the session is configured, not a runner listed as configured and never
        used; ``base``: where a relative path starts (where pytest runs), ``given``: the spec as
        the user wrote it."""
        if self.path is None:
            return
        runner = base / self.path
        if runner.is_dir():
            raise RunnerError(f"--runner {given!r}: {runner} is a folder; give the path of the "
                              "executable")
        for what, path in (("runner", self.path), ("tokenizer", self.tokenizer),
                           ("library folder", self.lib_dir)):
            if path is not None and not (base / path).exists():
                fix = ("give the path of your executor_runner (or NAME=native, NAME=python)"
                       if what == "runner" else f"fix its {what}")
                raise RunnerError(f"--runner {given!r}: {what} {base / path} does not exist; "
                                  f"{fix}")

    def make(self, progress: Progress = None, target: str = "host",
             hook: HookRelay | None = None) -> Runner:
        """The runner, built for ``target`` where we build it (the native runner): ``host``
        or a device's target such as ``aarch64-linux-gnu`` (QEMU). A plugin's
        ``pytest_sme2_make_runner`` hook, asked first through ``hook`` (:func:`runner_kinds`),
        may make it instead: it must for a kind of its own."""
        if hook is not None:
            runner = hook.pytest_sme2_make_runner(spec=self, target=target)
            if runner is not None:
                return with_defaults(runner)
        if self.kind not in KINDS:
            raise RunnerError(f"runner {self.name!r}: no plugin made a runner of kind "
                              f"{self.kind!r} (their pytest_sme2_make_runner returned None)")
        kind = KINDS[self.kind]
        kind.check_mask(self.hwcap_mask, f"runner {self.name!r}")
        return kind.make(self, progress, target)


def _python(spec: RunnerSpec, progress: Progress, target: str) -> Runner:
    base = PythonRunner()
    return PythonRunner(info=RunnerInfo(spec.name, "python", {**base.info.labels, **spec.labels}),
                        progress=progress)


def _native(spec: RunnerSpec, progress: Progress, target: str) -> Runner:
    binary = build_native_runner(progress=progress, target=target)
    runner = NativeRunner.from_build(binary, spec.name)
    return NativeRunner(runner.binary,
                        RunnerInfo(spec.name, "native", {**runner.info.labels, **spec.labels}),
                        runner.libs, spec.hwcap_mask)


def _text_llm_runner(spec: RunnerSpec, progress: Progress, target: str) -> Runner:
    base = TextLlmRunner()
    return TextLlmRunner(RunnerInfo(spec.name, "text_llm_runner",
                                    {**base.info.labels, **spec.labels}),
                         tokenizer=spec.tokenizer, progress=progress)


def _binary(spec: RunnerSpec, progress: Progress, target: str) -> Runner:
    return BinaryRunner(spec.name, spec.path, spec.lib_dir, dict(spec.labels), spec.hwcap_mask)


def _llama_main(spec: RunnerSpec, progress: Progress, target: str) -> Runner:
    return LlamaMainRunner(spec.name, spec.path, spec.lib_dir, dict(spec.labels),
                           spec.hwcap_mask, tokenizer=spec.tokenizer)


@dataclass(frozen=True)
class RunnerKind:
    """A runner kind built in: ``name`` is ``RunnerSpec.kind`` and ``RunnerInfo.kind``;
    ``make`` makes its runner from a spec; ``builtin``: configured by its name alone
    (``--runner NAME=python``), and every session has a runner of that name; ``host_only``: it
    runs in this machine's Python, so a hwcap mask cannot reach it; ``tokenizer``: its spec
    takes ``tokenizer=`` (it feeds text, not token ids)."""
    name: str
    make: Callable[[RunnerSpec, Progress, str], Runner]
    builtin: bool = False
    host_only: bool = False
    tokenizer: bool = False

    def check_mask(self, mask: str | None, who: str) -> None:
        if mask is not None and self.host_only:
            raise RunnerError(f"{who}: mask= needs a native or binary runner on an Arm64 device; "
                              f"the {self.name} runner runs on the host")


# The runner kinds built in, one row each: --runner's parsing and its errors, the runners every
# session has and RunnerSpec.make read it. A kind a plugin makes (pytest_sme2_runner_kinds) is
# not in it.
KINDS: dict[str, RunnerKind] = {k.name: k for k in (
    RunnerKind("python", _python, builtin=True, host_only=True),
    RunnerKind("native", _native, builtin=True),
    RunnerKind("text_llm_runner", _text_llm_runner, builtin=True, host_only=True,
               tokenizer=True),
    RunnerKind("binary", _binary),
    RunnerKind("llama_main", _llama_main),
)}
BUILTIN = tuple(k.name for k in KINDS.values() if k.builtin)


def spec_forms() -> str:
    """``NAME=python, NAME=native or NAME=/path/...``: what --runner takes, from the table."""
    return (f"{', '.join(f'NAME={name}' for name in BUILTIN)} or "
            "NAME=/path/to/executor_runner[,libs=DIR][,label=value...]")


def parse_runner_spec(text: str, kinds: Collection[str] = ()) -> RunnerSpec:
    """Parse one ``[NAME=]SPEC`` string; errors name the spec and show the expected form.
    ``kinds``: runner kinds plugins make (:func:`runner_kinds`), accepted as
    ``NAME=KIND[,key=value...]``."""
    raw = text.strip()
    usage = f"expected {spec_forms()}"
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
    mask = None
    tokenizer = None
    for item in rest:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise RunnerError(f"--runner {text!r}: {item!r} is not key=value; {usage}")
        if key.strip() == "libs":
            lib_dir = Path(value.strip()).expanduser()
        elif key.strip() == "mask":
            mask = value.strip()
        elif key.strip() == "tokenizer":
            tokenizer = Path(value.strip()).expanduser()
        else:
            labels[key.strip()] = value.strip()
    if target == "native" and labels.get("sme2") == "off" and mask is None:
        # Our runner is one build with SME2 kernels: the only true "SME2 off" is a masked process.
        mask = "sme"
    if mask is not None:
        labels.update(mask_labels(mask, labels, text))
    if target in BUILTIN:
        if lib_dir is not None:
            raise RunnerError(f"--runner {text!r}: libs= applies to a binary path only")
        kind = KINDS[target]
        kind.check_mask(mask, f"--runner {text!r}")
        if tokenizer is not None and not kind.tokenizer:
            raise RunnerError(f"--runner {text!r}: tokenizer= applies to text_llm_runner and "
                              "a llama_main; the native and python runners feed token ids")
        if tokenizer is not None:
            try:
                tokenizer = check_tokenizer_path(tokenizer, f"--runner {text!r}")
            except TokenizerError as e:
                raise RunnerError(str(e)) from None
        return RunnerSpec(name, target, labels=labels, hwcap_mask=mask, tokenizer=tokenizer)
    if target in kinds:
        return RunnerSpec(name, target, lib_dir=lib_dir, labels=labels, hwcap_mask=mask)
    if "/" not in target and not target.startswith("."):
        plugins = f", a kind a plugin makes ({', '.join(sorted(kinds))})" if kinds else ""
        raise RunnerError(f"--runner {text!r}: {target!r} is neither a built-in runner "
                          f"({', '.join(BUILTIN)}){plugins} nor a path; {usage}")
    if tokenizer is not None or is_llama_main(target):
        if tokenizer is None:
            raise RunnerError(f"--runner {text!r}: a llama_main needs its tokenizer; add "
                              ",tokenizer=/path/to/tokenizer.model")
        return RunnerSpec(name, "llama_main", Path(target).expanduser(), lib_dir, labels, mask,
                          tokenizer)
    return RunnerSpec(name, "binary", Path(target).expanduser(), lib_dir, labels, mask)


def masked_pair() -> list[RunnerSpec]:
    """The SME2 comparison from one binary: ``sme2_on`` (the native runner as built),
    ``sme2_off`` (the same binary, SME and SME2 hidden) and ``sme_only`` (SME2 hidden, SME kept),
    so the two sides differ in the CPU features the process sees and nothing else."""
    on = {"sme2": "on", "made_by": "one binary; hwcaps as the device reports them"}
    off = mask_labels("sme", {})
    sme = mask_labels("sme2", {})
    return [RunnerSpec("sme2_on", "native", labels=on),
            RunnerSpec("sme2_off", "native", labels={**off, "made_by": "one binary; "
                                                     + off["made_by"]}, hwcap_mask="sme"),
            RunnerSpec("sme_only", "native", labels={**sme, "made_by": "one binary; "
                                                     + sme["made_by"]}, hwcap_mask="sme2")]


def sme_pair() -> list[RunnerSpec]:
    """The SME comparison on a device with SME but no SME2, from one binary: ``sme_on`` (the
    native runner, hwcaps as the device reports them: SME, no SME2) and ``sme_off`` (the same
    binary, SME hidden too), so the two sides differ in SME and nothing else."""
    off = mask_labels("sme", {})
    return [RunnerSpec("sme_on", "native", labels={
                "sme": "on", "made_by": "one binary; hwcaps as the device reports them"}),
            RunnerSpec("sme_off", "native", labels={**off, "sme": "off", "made_by": "one binary; "
                                                    + off["made_by"]}, hwcap_mask="sme")]


def mask_labels(mask: str, labels: dict[str, str], text: str = "") -> dict[str, str]:
    """The labels a hwcap mask implies: SME2 is off, and how (recorded with every result)."""
    if mask not in MASKS:
        raise RunnerError(f"--runner {text!r}: unknown mask {mask!r}; use mask=sme (no SME, no "
                          "SME2) or mask=sme2 (SME without SME2)")
    if labels.get("sme2", "off") != "off":
        raise RunnerError(f"--runner {text!r}: mask={mask} hides SME2, so the label "
                          f"sme2={labels['sme2']} would be false; drop it")
    return {"sme2": "off", "hwcap_mask": mask, "made_by": describe_mask(mask)}


def runner_specs(texts: list[str], kinds: Collection[str] = (),
                 base: Path | None = None) -> dict[str, RunnerSpec]:
    """The configured runners by name: the built-ins, then the user's (which may override).
    ``kinds``: as for :func:`parse_runner_spec`; ``base``: where relative paths start, their
    files checked (:meth:`RunnerSpec.check_files`; None: not checked)."""
    specs = {name: RunnerSpec(name, name) for name in BUILTIN}
    seen: set[str] = set()
    for text in texts:
        spec = parse_runner_spec(text, kinds)
        if base is not None:
            spec.check_files(base, text)
        if spec.name in seen:
            raise RunnerError(f"--runner {text!r}: a runner named {spec.name!r} is already "
                              "configured")
        seen.add(spec.name)
        specs[spec.name] = spec
    return specs


def runner_kinds(hook: Any | None) -> tuple[str, ...]:
    """The runner kinds plugins make (for ``--runner NAME=KIND``), each once, asked through
    ``hook`` (a pluggy hook relay; None: none)."""
    if hook is None:
        return ()
    return tuple(dict.fromkeys(kind for kinds in hook.pytest_sme2_runner_kinds()
                               for kind in kinds or ()))
