"""One benchmark at a time per device under pytest-xdist, with xdist's own ``loadgroup``
scheduling: each device is a group (:func:`pytest_sme2.devices.base.schedule_group`), and a
group runs on one worker at a time. With ``-n``, ``--dist load`` (what -n means unless told
otherwise) becomes ``loadgroup``; a ``--dist`` that would spread a device over workers fails
each device test with one line. This module is the xdist glue the plugin registers: the
controller's and the workers' sides.

xdist learns a test's group from an ``@<group>`` suffix its worker appends to the node id.
On pytest 9.2 that write is lost (node ids are structured now) and every test is scheduled on
its own, silently (pytest-dev/pytest-xdist#1386); a suffix written into the structured id does
not survive the trip of a test report to the controller either. So the groups travel beside the
ids, as an xdist maintainer suggests on #1388: each worker writes ``node id -> group`` for the
tests that use a device into a folder the controller named (``workerinput``), and the
controller's scheduler — xdist's LoadGroupScheduling, asked for the group of a node id — reads
them when it first schedules, after every worker reported its collection. Tests without a
device keep what xdist gives them (their own ``xdist_group`` marks where xdist's suffix works)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping

import pytest

from pytest_sme2.devices.registry import schedule_group

# workerinput keys, set by the controller for each worker
DEVICES = "sme2_devices"           # the resolved device list: every worker collects the same ids
DIST = "sme2_dist"                 # the controller's --dist (a worker parses only the argv)
GROUPS_DIR = "sme2_groups_dir"     # where workers write their groups
_PREFIX = "sme2-device:"           # scope names of device groups, apart from any user group

DeviceOf = Callable[[pytest.Item], "str | None"]   # the device a test uses, None: none


def configure_controller(config: pytest.Config, devices: tuple[str, ...]) -> list[str]:
    """On the process that schedules: choose loadgroup for -n and register the controller's
    side; returns the header lines saying what was chosen."""
    notes = []
    if getattr(config.option, "numprocesses", None) and \
            getattr(config.option, "dist", None) == "load":
        # Before xdist's pytest_configure (trylast) and its scheduler read the option.
        config.option.dist = "loadgroup"
        notes.append("sme2: -n: --dist loadgroup, one group per device: one benchmark at a "
                     "time on each device")
    config.pluginmanager.register(_Controller(config, devices), "sme2-xdist-controller")
    return notes


def configure_worker(config: pytest.Config, device_of: DeviceOf) -> tuple[str, ...]:
    """On a worker: the controller's device list (empty: not given) and the worker's side."""
    given = config.workerinput  # type: ignore[attr-defined]
    if given.get(DIST) == "loadgroup":
        # The worker parsed --dist from the command line, which does not say loadgroup when
        # the controller chose it; xdist's worker reads this flag.
        config.option.loadgroup = True
    config.pluginmanager.register(_WorkerMarks(device_of), "sme2-xdist-worker-marks")
    config.pluginmanager.register(_WorkerGroups(device_of), "sme2-xdist-worker-groups")
    return tuple(given.get(DEVICES) or ())


def overlap_problem(config: pytest.Config) -> str | None:
    """On a worker: why its distribution would measure one device from two workers at once."""
    if getattr(config.option, "loadgroup", False):
        return None
    dist = config.workerinput.get(DIST, "?")  # type: ignore[attr-defined]
    return (f"--dist {dist} would measure on one device from several workers at once: use "
            "--dist loadgroup (what -n picks with pytest-sme2 unless told otherwise)")


class _Controller:
    def __init__(self, config: pytest.Config, devices: tuple[str, ...]):
        self.config = config
        self.devices = devices
        self._groups_dir: Path | None = None

    @property
    def groups_dir(self) -> Path:
        """A fresh folder for this session's worker group files."""
        if self._groups_dir is None:
            self._groups_dir = Path(tempfile.mkdtemp(prefix="pytest-sme2-groups-"))
        return self._groups_dir

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[DEVICES] = list(self.devices)
        node.workerinput[DIST] = str(getattr(self.config.option, "dist", ""))
        node.workerinput[GROUPS_DIR] = str(self.groups_dir)

    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        if config.getvalue("dist") != "loadgroup":
            return None
        return device_scheduler(config, log, self.groups_dir)

    def pytest_unconfigure(self) -> None:
        if self._groups_dir is not None:
            shutil.rmtree(self._groups_dir, ignore_errors=True)


class _WorkerMarks:
    def __init__(self, device_of: DeviceOf):
        self.device_of = device_of

    @pytest.hookimpl(tryfirst=True)   # before xdist's worker reads the marks
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Each test that uses a device joins that device's xdist group."""
        for item in items:
            device = self.device_of(item)
            if device is not None:
                item.add_marker(pytest.mark.xdist_group(schedule_group(device)))


class _WorkerGroups:
    def __init__(self, device_of: DeviceOf):
        self.device_of = device_of

    @pytest.hookimpl(trylast=True)    # after xdist's worker made its node ids
    def pytest_collection_modifyitems(self, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        """Write ``node id -> group`` for the controller's scheduler (module docstring)."""
        folder = config.workerinput.get(GROUPS_DIR)  # type: ignore[attr-defined]
        if not folder or not config.getvalue("loadgroup"):
            return
        groups = {item.nodeid: schedule_group(device) for item in items
                  if (device := self.device_of(item)) is not None}
        write_groups(Path(folder), config.workerinput["workerid"],  # type: ignore[attr-defined]
                     groups)


def write_groups(folder: Path, worker: str, groups: Mapping[str, str]) -> None:
    """A worker's ``node id -> group``, written whole (rename) so a reader never sees half."""
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{worker}.json.part"
    tmp.write_text(json.dumps(dict(groups)))
    os.replace(tmp, folder / f"{worker}.json")


def read_groups(folder: Path) -> dict[str, str]:
    """Every worker's groups (they collected the same tests, so they agree)."""
    out: dict[str, str] = {}
    for path in sorted(folder.glob("*.json")):
        out.update(json.loads(path.read_text()))
    return out


def device_scheduler(config: Any, log: Any, folder: Path) -> Any:
    """xdist's LoadGroupScheduling, told each device test's group by the workers' files."""
    from xdist.scheduler import LoadGroupScheduling  # xdist: only a session under xdist needs it

    class DeviceGroupScheduling(LoadGroupScheduling):
        _groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self._groups is None:   # first asked in schedule(): every collection is in
                self._groups = read_groups(folder)
            group = self._groups.get(nodeid)
            return _PREFIX + group if group is not None else super()._split_scope(nodeid)

    return DeviceGroupScheduling(config, log)
