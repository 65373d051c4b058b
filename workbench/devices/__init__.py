"""Device specs (GPU and CPU peak bandwidth, FLOP/s per dtype), **the** ceilings (``Ceiling``: measured,
datasheet or default, each labelled; ``ceiling_for`` resolves one), measured CPU ceilings, environment fingerprint.

Imports only the standard library at import time; torch is imported where it is needed.
"""

from workbench.devices.ceilings import DEFAULT_CPU_CEILING, Ceiling, ceiling_for, cpu_ceilings, gpu_ceilings
from workbench.devices.cpu_ceiling import CpuCeiling, cached_cpu_ceiling, measure_cpu_ceiling
from workbench.devices.cpu_specs import KNOWN_CPUS, CpuSpec, cpu_spec, find_cpu_spec
from workbench.devices.fingerprint import device_name, environment_fingerprint
from workbench.devices.specs import (
    DTYPES,
    KNOWN_DEVICES,
    DeviceSpec,
    device_spec,
    find_device_spec,
    spec_for_device_properties,
)

__all__ = [
    "Ceiling",
    "DEFAULT_CPU_CEILING",
    "ceiling_for",
    "cpu_ceilings",
    "gpu_ceilings",
    "CpuCeiling",
    "CpuSpec",
    "DTYPES",
    "DeviceSpec",
    "KNOWN_CPUS",
    "KNOWN_DEVICES",
    "cached_cpu_ceiling",
    "cpu_spec",
    "device_name",
    "device_spec",
    "environment_fingerprint",
    "find_cpu_spec",
    "find_device_spec",
    "measure_cpu_ceiling",
    "spec_for_device_properties",
]
