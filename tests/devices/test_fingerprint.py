"""Environment fingerprint: JSON-able, and it reflects the settings actually in effect."""

from __future__ import annotations

import json

import torch

from workbench.devices import device_name, environment_fingerprint


def test_fingerprint_is_json_and_names_versions():
    env = environment_fingerprint()
    again = json.loads(json.dumps(env))
    assert again == env
    assert env["torch"]["version"] == torch.__version__
    assert env["host"]["logical_cpus"] >= 1 and env["host"]["cpu_model"]
    gpu = env["torch"]["gpu"]
    assert gpu["available"] == torch.cuda.is_available()
    if not gpu["available"]:
        assert "is_available() is False" in gpu["reason"]
        assert device_name(env) == env["host"]["cpu_model"]


def test_math_mode_follows_the_flags():
    saved = (torch.get_float32_matmul_precision(), torch.backends.cudnn.benchmark, torch.get_num_threads())
    try:
        torch.set_float32_matmul_precision("high")
        torch.backends.cudnn.benchmark = True
        torch.set_num_threads(1)
        env = environment_fingerprint()["torch"]
        assert env["math_mode"]["float32_matmul_precision"] == "high"
        assert env["math_mode"]["cudnn_benchmark"] is True
        assert env["num_threads"] == 1
    finally:
        torch.set_float32_matmul_precision(saved[0])
        torch.backends.cudnn.benchmark = saved[1]
        torch.set_num_threads(saved[2])
