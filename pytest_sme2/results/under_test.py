"""What was under test in a measurement (:class:`UnderTest`): the model's source, the export
recipe, the exported program, the torch/executorch/torchao versions, the runner's build labels
and how the latency was timed. A block records it (results.json's ``under_test``), a baseline
session keeps it, and the gate names what changed since the baseline
(``"model source", "executorch 1.5.1 -> 1.5.2"``). Working it out for a block (the export's
meta.json, the registry) is :func:`pytest_sme2.baselines.key.under_test_of`."""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_sme2.results.codec import added, decode, encode
from pytest_sme2.results.timing import timing_change

VERSIONED = ("torch", "executorch", "torchao")


@dataclass(frozen=True)
class UnderTest:
    """What is under test in a measurement. None: not known (a baseline recorded before this
    was recorded knows only ``export_key``, which hashes the first three and the versions)."""

    export_key: str = ""
    model_source: str | None = None       # the model builder's source and arguments
    recipe: str | None = None             # the export recipe
    program: str | None = None            # sha256 of the .pte: the exported graph
    versions: dict[str, str] = field(default_factory=dict)        # torch, executorch, torchao
    runner_labels: dict[str, str] = field(default_factory=dict)   # the runner's build labels
    # How the latency was timed (results.timing: "untraced", "operator-traced"); None: not
    # recorded (every version before it timed through the operator tracer).
    timing: str | None = field(default=None, metadata=added())

    to_dict = encode
    from_dict = classmethod(decode)

    def changes_since(self, old: UnderTest) -> list[str]:
        """What changed from ``old`` (a baseline's newest session) to this, for people:
        ``["model source", "executorch 1.5.1 -> 1.5.2"]``. Parts one side does not know are
        not compared; an export key that changed for no known reason is named as such."""
        out: list[str] = []
        if _known_differ(old.model_source, self.model_source):
            out.append("model source")
        if _known_differ(old.recipe, self.recipe):
            out.append("export recipe")
        versions = [p for p in VERSIONED
                    if _known_differ(old.versions.get(p), self.versions.get(p))]
        out += [f"{p} {old.versions[p]} -> {self.versions[p]}" for p in versions]
        if old.program and self.program:
            if old.program != self.program and not out:
                out.append("exported program")
            elif old.program == self.program and out:
                out.append("exported program unchanged")
        elif old.export_key != self.export_key and not out:
            out.append("export (model source, recipe or torch/executorch/torchao versions)")
        labels = sorted(k for k in set(old.runner_labels) | set(self.runner_labels)
                        if old.runner_labels.get(k) != self.runner_labels.get(k)
                        and k not in versions)   # executorch=... said once, as a version
        # A timing mode changed (or a baseline from before it was recorded) is never compared
        # as if nothing had: tracing's own cost was inside the old figures.
        timing = timing_change(old.timing, self.timing) if self.timing else None
        if timing:
            out.append(timing)
        if labels:
            out.append("runner build labels " + ", ".join(
                f"{k}={old.runner_labels.get(k, '(none)')} -> "
                f"{self.runner_labels.get(k, '(none)')}" for k in labels))
        return out


def _known_differ(a: str | None, b: str | None) -> bool:
    return bool(a) and bool(b) and a != b and "missing" not in (a, b)
