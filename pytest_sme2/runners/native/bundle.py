"""Our runner on any arm64 phone with nothing but adb: a glibc program that brings its own loader.

A phone's kernel runs any aarch64 Linux program; only the C library differs (bionic, not glibc).
The runner cross-built against the aarch64 ExecuTorch wheel (:mod:`.cross`) runs there when the
glibc dynamic loader it was linked for starts it, with every library it needs in one folder:

    ./ld-linux-aarch64.so.1 --library-path DIR [--preload DIR/libpytest_sme2_preload.so] \\
        ./sme2_runner --model_path ...

The bundle is the runner, its ExecuTorch libraries, the preload library (hwcap mask, address
map, sampler) and the glibc files their ``DT_NEEDED`` entries reach in the cross toolchain's
sysroot (loader, libc, libm, libstdc++, libgcc_s, libdl, libpthread): about 17 MB, pushed once
per content hash. No bionic program is involved, so the NDK is not needed; the loader's
``--preload`` replaces ``LD_PRELOAD``, which the phone's own (bionic) tools would try to load.

A user's NDK build of ``executor_runner`` is a bionic program: it runs directly, as before.
"""

from __future__ import annotations

import functools
import re
import signal
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Sequence

from pytest_sme2.runners.base import RunnerError

GLIBC_LOADER = "ld-linux-aarch64.so.1"
GLIBC_INTERPRETER = f"/lib/{GLIBC_LOADER}"


@dataclass(frozen=True)
class GlibcBundle:
    """The files of one bundle (the runner first, the loader among them, all with distinct
    names: they are pushed into one folder)."""

    files: tuple[Path, ...]
    preload: Path | None = None

    @property
    def executable(self) -> Path:
        return self.files[0]

    def argv(self, folder: str, argv: Sequence[str]) -> list[str]:
        """The command that starts ``argv`` (its first word: the runner) through the bundled
        loader in the device folder ``folder``."""
        where = PurePosixPath(folder)
        start = [str(where / GLIBC_LOADER), "--library-path", folder]
        if self.preload is not None:
            start += ["--preload", str(where / self.preload.name)]
        return [*start, str(where / self.executable.name), *argv[1:]]


@functools.lru_cache(maxsize=256)
def _elf_facts(path: str, size: int, mtime_ns: int) -> tuple[str | None, tuple[str, ...]]:
    from elftools.common.exceptions import ELFError  # elftools: only _elf_facts() needs it
    from elftools.elf.dynamic import DynamicSection  # elftools: only _elf_facts() needs it
    from elftools.elf.elffile import ELFFile  # elftools: only _elf_facts() needs it

    try:
        with open(path, "rb") as fh:
            elf = ELFFile(fh)
            interp = next((s.get_interp_name() for s in elf.iter_segments()
                           if s["p_type"] == "PT_INTERP"), None)
            needed = tuple(tag.needed for section in elf.iter_sections()
                           if isinstance(section, DynamicSection)
                           for tag in section.iter_tags() if tag.entry.d_tag == "DT_NEEDED")
    except (OSError, ELFError) as e:
        raise RunnerError(f"{path}: not a readable ELF file ({e})") from None
    return interp, needed


def elf_facts(path: Path) -> tuple[str | None, tuple[str, ...]]:
    """(PT_INTERP, DT_NEEDED names) of an ELF file; cached per (path, size, mtime)."""
    st = path.stat()
    return _elf_facts(str(path), st.st_size, st.st_mtime_ns)


def is_glibc_program(path: Path) -> bool:
    """An aarch64 program the glibc loader starts (not a bionic one, ``/system/bin/linker64``;
    not a script)."""
    with open(path, "rb") as fh:
        if fh.read(4) != b"\x7fELF":
            return False
    return (elf_facts(path)[0] or "").endswith(f"/{GLIBC_LOADER}")


def glibc_bundle(files: Sequence[Path], sysroot_lib: Path,
                 preload: Path | None = None) -> GlibcBundle:
    """The runner's files (executable first, then its libraries) plus the preload library and
    every library they need, found beside them first and in ``sysroot_lib`` (the cross
    toolchain's glibc) second. RunnerError names a library that is nowhere."""
    given = [Path(f) for f in files] + ([Path(preload)] if preload is not None else [])
    by_name: dict[str, Path] = {p.name: p for p in given}
    search = list(dict.fromkeys([p.parent for p in given] + [Path(sysroot_lib)]))
    todo = list(given)
    while todo:
        current = todo.pop()
        for name in elf_facts(current)[1]:
            if name in by_name:
                continue
            found = next((d / name for d in search if (d / name).is_file()), None)
            if found is None:
                raise RunnerError(f"{current.name} needs {name}, which is neither beside it nor "
                                  f"in the glibc sysroot {sysroot_lib}; run `pytest-sme2 setup "
                                  "qemu` (it installs the aarch64 cross toolchain)")
            by_name[name] = found     # by its needed name: a symlink is pushed as its target
            todo.append(by_name[name])
    if GLIBC_LOADER not in by_name:
        loader = Path(sysroot_lib) / GLIBC_LOADER
        if not loader.is_file():
            raise RunnerError(f"the glibc loader {loader} is missing; run `pytest-sme2 setup "
                              "qemu` (it installs the aarch64 cross toolchain)")
        by_name[GLIBC_LOADER] = loader
    rest = sorted((p for n, p in by_name.items() if n != given[0].name), key=lambda p: p.name)
    return GlibcBundle((given[0], *rest), preload)


# What the glibc loader, the kernel or the phone's shell say when the loader cannot start the
# runner (our runner's own failures are one line of its own and never look like these).
_LOADER_FAILURE = re.compile(
    r"ld-linux-aarch64\.so\.1\S*:.*(?:Permission denied|not found|cannot)|"
    r"error while loading shared libraries|kernel too old|Exec format error|"
    r"cannot execute binary file")


def loader_failed(rc: int, stderr: str) -> bool:
    """The loader (not the runner) failed: an exec failure (126/127), a seccomp kill
    (SIGSYS) or a loader-shaped complaint."""
    return rc in (126, 127, 128 + signal.SIGSYS) or bool(_LOADER_FAILURE.search(stderr))
