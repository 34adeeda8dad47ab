"""Item reads (``record["key"]``, ``record.get("key")``) on records that were plain dicts in a
block before (runner, device, the gate's verdicts, instruction counts): they answer as the dict
did, from the record's dict form, with a :class:`DeprecationWarning`; read the attributes."""

from __future__ import annotations

import warnings
from collections.abc import KeysView
from typing import Any


class DeprecatedItemReads:
    """``to_dict()``'s items, read as the block's dict was read, deprecated."""

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def _dict(self) -> dict[str, Any]:
        warnings.warn(f"reading {type(self).__name__} as a dict is deprecated: read its "
                      "attributes", DeprecationWarning, stacklevel=3)
        return self.to_dict()

    def __getitem__(self, key: str) -> Any:
        return self._dict()[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self._dict().get(key, default)

    def keys(self) -> KeysView[str]:
        return self._dict().keys()

    def __contains__(self, key: object) -> bool:
        return key in self._dict()
