"""The one device-kind table: what --device's help, the registry and is_emulated read."""

from __future__ import annotations

import pytest

from pytest_sme2.devices.base import DeviceError
from pytest_sme2.devices.kinds import KINDS, device_help
from pytest_sme2.devices.registry import HOST_GROUP, DeviceSpec, open_device, schedule_group
from pytest_sme2.measure.config import is_emulated
from pytest_sme2.measure.options import OPTIONS


def test_the_option_help_and_the_unknown_kind_error_name_every_kind():
    assert OPTIONS["device"].help == device_help()
    with pytest.raises(DeviceError) as e:
        open_device("phone")
    for kind in KINDS.values():
        assert kind.help in device_help()
        assert all(f"'{s}'" in str(e.value) for s in kind.specs)


@pytest.mark.parametrize("name", list(KINDS))
def test_each_kind_is_read_from_its_row(name):
    kind = KINDS[name]
    spec = kind.specs[-1]
    assert DeviceSpec.parse(spec).kind == name
    assert is_emulated(spec) == kind.emulated
    assert (schedule_group(spec) == HOST_GROUP) == kind.on_host_cpu


def test_a_plugins_kind_is_neither_emulated_nor_on_the_host_cpu():
    assert not is_emulated("board:1") and schedule_group("board:1") == "board:1"
