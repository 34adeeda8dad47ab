"""Files: writing so that a reader never sees half of one (a temporary file renamed into place,
with the mode ``open()`` would have left), and a file's sha256, taken once per version."""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from pathlib import Path


def atomic_write_text(path: Path, text: str) -> None:
    """Write via a temporary file and rename: readers see the old or the new file, never half."""
    atomic_write_bytes(path, text.encode())


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """:func:`atomic_write_text` for bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = _mode_for(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)   # mkstemp's file is private (0600); results are for sharing
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _mode_for(path: Path) -> int:
    """The mode ``open(path, "w")`` would leave: the file's own if it exists, else 0666 less
    the umask (read from the process, which has no call that only reads it)."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


# Hashes already taken in this process, by path, size and mtime: a session looks a file up once
# per block, and a model, runner or library rarely changes during one.
_HASHED: dict[tuple[str, int, int], str] = {}


def file_sha256(path: Path) -> str:
    """The file's sha256 (hex), computed once per version of the file."""
    st = Path(path).stat()
    seen = (str(Path(path).resolve()), st.st_size, st.st_mtime_ns)
    if seen not in _HASHED:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        _HASHED[seen] = h.hexdigest()
    return _HASHED[seen]
