"""Workloads and settings shared by the variant tests (imported by name: no package here)."""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch

torch.set_num_threads(1)


def chain(x):
    """A small elementwise chain: the usual baseline in these tests."""
    return (x.sin() * 2 + 1).relu()


FAST = dict(checks=2, budget_s=0.3, min_rounds=6, max_rounds=12, profile=False)
