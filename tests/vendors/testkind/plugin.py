"""The test kind's worker hooks: the harness calls setup() before the device is used and records what
environment() returns with the results, so a test can see both ran inside the worker."""
import os

_seen = {}


def setup(device) -> None:
    _seen["setup_kind"] = device.kind
    _seen["visible_at_setup"] = os.environ.get(device.visible_devices_env or "", None)


def environment() -> dict:
    return {"testkind_plugin": dict(_seen)}
