"""An Android phone over adb (adbutils talking to an adb server, local or on another machine):
which device a spec names (:mod:`.discovery`), the adb plumbing (:mod:`.adb`), what a run puts
on the phone (:mod:`.staging`), the device and its runs (:mod:`.device`), and its facts parsed
from one shell round trip (:mod:`.facts`).

Spec: ``android`` (the one attached device), ``android:SERIAL``, ``android:SERIAL@HOST:PORT``
(a device on another machine's adb server; ``android:@HOST:PORT`` for its only device);
``android:*`` and ``android:*@HOST:PORT`` name every ready device of that server."""

from pytest_sme2.devices.android.adb import QUERY_TIMEOUT_S, state_problem
from pytest_sme2.devices.android.device import (ANDROID_TARGET, GLIBC_TARGET, AndroidDevice,
                                                device_lock, loader_failed)
from pytest_sme2.devices.android.discovery import (ALL, AndroidSpec, attached, expand_all,
                                                   is_loopback, open_android, parse_spec,
                                                   remote_server_warning)
from pytest_sme2.devices.android.staging import CACHE_DIR, DEVICE_TMP, file_sha256

__all__ = ["ALL", "ANDROID_TARGET", "AndroidDevice", "AndroidSpec", "CACHE_DIR", "DEVICE_TMP",
           "GLIBC_TARGET", "QUERY_TIMEOUT_S", "attached", "device_lock", "expand_all",
           "file_sha256", "is_loopback", "loader_failed", "open_android", "parse_spec",
           "remote_server_warning", "state_problem"]
