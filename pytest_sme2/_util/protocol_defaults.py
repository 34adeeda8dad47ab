"""A plugin's object as a full protocol: what it lacks of the optional members comes from a
table of defaults, everything else from the object itself (the devices' and runners' edge:
:func:`pytest_sme2.devices.base.with_defaults`, :func:`pytest_sme2.runners.base.with_defaults`),
so the rest of the library never probes an object with ``getattr``."""

from __future__ import annotations

from typing import Any, Mapping


class WithDefaults:
    def __init__(self, inner: object, defaults: Mapping[str, Any]):
        self._inner, self._defaults = inner, defaults

    def __getattr__(self, name: str) -> Any:
        try:
            return getattr(self._inner, name)
        except AttributeError:
            if name in self._defaults:
                return self._defaults[name]
            raise

    def __repr__(self) -> str:
        return repr(self._inner)

    @property  # type: ignore[misc]
    def __class__(self):  # isinstance() sees the plugin's own class
        return type(self._inner)
