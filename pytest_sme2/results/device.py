"""What a block was measured on and with: the device's facts (:class:`DeviceFacts`) as devices
read them and results.json stores them (a block's ``device``), with the ``--device`` spec it was
opened with; and the runner (:class:`RunnerInfo`: name, kind and build labels) as runners give
it (a block's ``runner_info``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_sme2.results.codec import decode, encode


# What a device's hwcaps say of SME, as one class: the pair a device gets, the verdicts it can
# reach and the baselines it is judged against differ by it (docs/devices.md, "Which phones
# have SME").
SME2_CLASS = "SME2"
SME1_CLASS = "SME (no SME2)"
NO_SME_CLASS = "no SME"
UNKNOWN_CLASS = "unknown"


def sme_class(sme: bool | None, sme2: bool | None) -> str:
    """``SME2``, ``SME (no SME2)`` (the 2026 Snapdragon flagship, ``--device qemu:sme1``),
    ``no SME`` or ``unknown``, from the hwcaps' SME and SME2 flags (None: not known)."""
    if sme2:
        return SME2_CLASS
    if sme is False:
        return NO_SME_CLASS
    if sme and sme2 is False:
        return SME1_CLASS
    return UNKNOWN_CLASS


_FACTS = ("kind", "serial", "model", "cpu", "abi", "os", "kernel", "cores", "sme", "sme2",
          "executorch")


@dataclass(frozen=True)
class DeviceFacts:
    kind: str = ""                  # host | android | qemu | macos
    serial: str = ""
    model: str = ""                 # board / machine model
    cpu: str = ""                   # CPU or SoC name
    abi: str = ""                   # x86_64, arm64-v8a, ...
    os: str = ""
    kernel: str = ""
    cores: int = 0
    sme: bool | None = None         # None: could not tell
    sme2: bool | None = None
    executorch: str = ""
    extra: dict = field(default_factory=dict)
    # An emulator (QEMU, a fake phone): its timings say nothing about speed.
    emulated: bool = False
    # What our runner is built for to run there, when the device names it (a fake phone);
    # "" : the device kind decides (devices/android/device.py).
    target: str = ""
    # The --device spec a block ran on ("" in facts a device reads of itself): how reports
    # name the device. Results before 0.2 have none.
    spec: str = ""
    # The order of ``extra``'s keys as a document held them (``emulated`` and ``target``
    # among them), so a document loads and writes back byte for byte.
    extra_order: tuple[str, ...] = field(default=(), compare=False, repr=False)
    # The keys, in order, of the dict it was read from (None: not read from one): facts an
    # older writer left out are not written back, so a file loads and writes back unchanged.
    stored_keys: tuple[str, ...] | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict:
        """As results.json has always held them: the spec first (when there is one),
        ``emulated`` and ``target`` inside ``extra`` (only when set)."""
        d: dict[str, Any] = {"spec": self.spec} if self.spec else {}
        d.update((k, getattr(self, k)) for k in _FACTS)
        extra = {**self.extra, **({"emulated": True} if self.emulated else {}),
                 **({"target": self.target} if self.target else {})}
        if self.extra_order:
            rank = {k: i for i, k in enumerate(self.extra_order)}
            extra = dict(sorted(extra.items(), key=lambda kv: rank.get(kv[0], len(rank))))
        d["extra"] = extra
        if self.stored_keys is not None:
            d = {k: d[k] for k in self.stored_keys if k in d}
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DeviceFacts:
        """What :meth:`to_dict` wrote (results.json's ``device``); facts an older writer left
        out take their defaults."""
        extra = dict(d.get("extra") or {})
        order = tuple(extra)
        emulated, target = bool(extra.pop("emulated", False)), str(extra.pop("target", ""))
        known = {k: d[k] for k in _FACTS if k in d}
        return cls(**known, extra=extra, emulated=emulated, target=target,
                   spec=str(d.get("spec") or ""), extra_order=order, stored_keys=tuple(d))

    @property
    def sme_class(self) -> str:
        """What the hwcaps say of SME as one class (:func:`sme_class`)."""
        return sme_class(self.sme, self.sme2)

    @property
    def label(self) -> str:
        """How reports name a device: its --device spec (results before 0.2 have none:
        serial)."""
        return self.spec or self.serial or self.kind or "?"


@dataclass(frozen=True)
class RunnerInfo:
    """Identity of a runner as recorded with results: name, kind and build labels."""

    name: str
    kind: str = ""
    labels: dict[str, str] = field(default_factory=dict)

    to_dict = encode
    from_dict = classmethod(decode)
