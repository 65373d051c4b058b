"""Device specs (peak bandwidth, FLOP/s per dtype), measured CPU ceilings, environment fingerprint.

Imports only the standard library at import time; torch is imported where it is needed.
"""
from workbench.devices.cpu_ceiling import CpuCeiling, cached_cpu_ceiling, measure_cpu_ceiling
from workbench.devices.fingerprint import device_name, environment_fingerprint
from workbench.devices.specs import (
    DTYPES, KNOWN_DEVICES, DeviceSpec, device_spec, find_device_spec, spec_for_device_properties,
)

__all__ = [
    "CpuCeiling", "DTYPES", "DeviceSpec", "KNOWN_DEVICES", "cached_cpu_ceiling", "device_name",
    "device_spec", "environment_fingerprint", "find_device_spec", "measure_cpu_ceiling",
    "spec_for_device_properties",
]
