"""The fake phone lives in the package (``pytest-sme2 fake-phone``): re-exported for the tests."""

from pytest_sme2.fakephone.adbd import FakeAdbDevice  # noqa: F401
from pytest_sme2.fakephone.transport import CommandSpan  # noqa: F401
from pytest_sme2.fakephone.sandbox import (GUEST_PRELOAD, FakeAndroidConfig,  # noqa: F401
                                           build_sandbox, crafted_auxv, default_props,
                                           emulated_cpu, hwcap_features, set_thermal)
