"""What a run puts on the phone, and where: one round trip that makes the folders, clears the
output folder and lists the remote hashes (a program's size: its folder is named by its hash),
then pushes only the files that differ.

Two places, both under ``/data/local/tmp``:
- ``pytest-sme2-cache/runner-<digest>/`` (kept between sessions): a runner with its libraries,
  loader and preload library, named by the hash of their names and contents, so a second
  session pushes nothing and two builds (SME2 on and off) never overwrite each other's files.
  ``pytest-sme2-cache/model-<sha>/`` likewise holds a program (and its ``.ptd``): a second
  session does not push a 1 GB model again. ``prune`` keeps the most recently used few of each.
- ``pytest-sme2-<session>/`` (removed at the end of the session): ``inputs-<digest>/`` and
  ``out/`` (ETDump, outputs, samples, address map).
Nothing outside these folders is ever written or removed. Before anything is pushed, the
folder's free space (``df``) must hold it: one line naming both sizes, not a half-pushed file."""

from __future__ import annotations

import hashlib
import re
import shlex
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from adbutils.errors import AdbTimeout

from pytest_sme2.devices.android.adb import QUERY_TIMEOUT_S, AdbLink
from pytest_sme2.devices.base import DeviceError
from pytest_sme2.devices.host import stderr_tail
from pytest_sme2._util.fsutil import file_sha256
from pytest_sme2.units import byte_size

DEVICE_TMP = "/data/local/tmp"
CACHE_DIR = f"{DEVICE_TMP}/pytest-sme2-cache"
KEEP_RUNNERS = 3                        # runner folders kept in the cache after a session
KEEP_MODELS = 2                         # model folders kept (an LLM's is GBs)
_FREE = "free-kb:"                      # the line of stage()'s answer that holds df's figure
_SESSION_DIR = re.compile(r"/data/local/tmp/pytest-sme2-[A-Za-z0-9_-]{1,40}")


@dataclass(frozen=True)
class Push:
    """One file to have on the device. ``by_size``: its folder is named by its content (a
    program's ``model-<sha>/``), so a file there of the right size is that content (a push cut
    short is shorter) and the phone is not made to hash a 1 GB program before every run."""

    local: Path
    remote: str
    mode: int
    sha: str
    by_size: bool = False

    @property
    def size(self) -> int:
        return self.local.stat().st_size

    @property
    def expected(self) -> str:
        """What the device's check prints when the file is already there."""
        return f"size:{self.size}" if self.by_size else self.sha

    def check_command(self) -> str:
        f = shlex.quote(self.remote)
        if self.by_size:
            return f's=$(stat -c %s {f} 2>/dev/null) && echo "size:$s" || echo -'
        return f'h=$(sha256sum {f} 2>/dev/null) && echo "${{h%% *}}" || echo -'


@dataclass(frozen=True)
class PushReport:
    """What one staging pushed: files and bytes sent, files already there, seconds spent."""

    pushed: int
    pushed_bytes: int
    present: int
    seconds: float


def runner_folder(files: list[Path]) -> tuple[str, list[Push]]:
    """The cache folder of a runner's files (named by their names and contents) and its pushes;
    the executable stays executable."""
    shas = [file_sha256(f) for f in files]
    digest = hashlib.sha256("".join(f"{f.name}\0{s}\0" for f, s in zip(files, shas))
                            .encode()).hexdigest()[:16]
    folder = f"{CACHE_DIR}/runner-{digest}"
    return folder, [Push(f, f"{folder}/{f.name}", 0o755 if i == 0 or f.name.startswith("ld-")
                         else 0o644, s) for i, (f, s) in enumerate(zip(files, shas))]


def check_inside(remote: str, roots: tuple[str, ...]) -> str:
    """Every path we write or remove must be inside one of our folders."""
    parts = PurePosixPath(remote).parts
    if ".." in parts or not any(remote.startswith(r + "/") for r in roots):
        raise DeviceError(f"refusing to touch {remote!r} outside {' and '.join(roots)}")
    return remote


def check_session_dir(folder: str) -> str:
    if not _SESSION_DIR.fullmatch(folder):      # guards every rm -rf of the session folder
        raise DeviceError(f"bad session folder {folder!r}")
    return folder


def free_kb_command(folder: str = DEVICE_TMP) -> str:
    """Prints ``free-kb:<KiB available>`` for ``folder``'s file system (toybox and coreutils
    ``df -k``: the fourth column of its second line)."""
    return (f"echo {_FREE}$(df -k {shlex.quote(folder)} 2>/dev/null | "
            "awk 'NR==2 {print $4}')")


def free_bytes(stdout: str) -> int | None:
    """The free space :func:`free_kb_command` printed, bytes (None: df did not say)."""
    for line in stdout.splitlines():
        if line.startswith(_FREE) and line[len(_FREE):].strip().isdigit():
            return int(line[len(_FREE):]) * 1024
    return None


def check_room(serial: str, sent: list[Push], free: int | None) -> None:
    """One line when the files to push do not fit in the device's free space."""
    need = sum(p.size for p in sent)
    if free is not None and need > free:
        names = ", ".join(sorted({p.local.name for p in sent}))
        raise DeviceError(f"device {serial} has {byte_size(free)} free in {DEVICE_TMP} and "
                          f"this run must push {byte_size(need)} ({names}); free space on the "
                          f"device (this plugin's files: {CACHE_DIR}) and run again")


def stage(adb: AdbLink, pushes: list[Push], out_dir: str, touch: tuple[str, ...]) -> PushReport:
    """One round trip: make the folders, clear ``out_dir`` (no stale ETDump), mark ``touch``
    used (the cache keeps recently used runners and models), list remote hashes and the free
    space; then push only what differs, if it fits."""
    q = shlex.quote
    dirs = sorted({str(PurePosixPath(p.remote).parent) for p in pushes} | set(touch))
    execs = " ".join(q(p.remote) for p in pushes if p.mode == 0o755)
    cmd = (f"mkdir -p {' '.join(q(d) for d in dirs)} && rm -rf {q(out_dir)} && "
           f"mkdir -p {q(out_dir)} && touch {' '.join(q(t) for t in touch)}"
           f" && {{ chmod 755 {execs} 2>/dev/null; true; }} && "
           + "".join(f"{{ {p.check_command()}; }}; " for p in pushes) + free_kb_command())
    t0 = time.perf_counter()
    with adb.link("while copying files to it"):
        try:
            res = adb.sh(cmd)
        except AdbTimeout:
            raise DeviceError(f"device {adb.serial} did not answer within {QUERY_TIMEOUT_S:g} "
                              f"s while preparing {out_dir}; reconnect it and run again") from None
        if res.returncode != 0:
            raise DeviceError(f"cannot prepare {out_dir} on device {adb.serial}: "
                              f"{stderr_tail(res.stderr)}")
        remote = [w for w in res.stdout.split() if not w.startswith(_FREE)]
        if len(remote) != len(pushes):
            remote = ["-"] * len(pushes)
        sent = [p for p, have in zip(pushes, remote) if have != p.expected]
        if sent:
            check_room(adb.serial, sent, free_bytes(res.stdout))
        for push in sent:
            adb.push(push.local, push.remote, push.mode)
    return PushReport(len(sent), sum(p.size for p in sent), len(pushes) - len(sent),
                      time.perf_counter() - t0)


def prune_command(keep: str | None = None) -> str:
    """Remove all but the ``KEEP_RUNNERS`` most recently used runner folders and the
    ``KEEP_MODELS`` most recently used model folders of the cache (and never ``keep``)."""
    q = shlex.quote
    spare = f'[ "$d" = {q(PurePosixPath(keep).name)} ] && continue; ' if keep else ""
    return " ".join(
        f"(cd {q(CACHE_DIR)} 2>/dev/null && for d in $(ls -td {kind}-* 2>/dev/null | "
        f'tail -n +{n + 1}); do {spare}case "$d" in {kind}-*) rm -rf "./$d" ;; esac; done);'
        for kind, n in (("runner", KEEP_RUNNERS), ("model", KEEP_MODELS))) + " true"
