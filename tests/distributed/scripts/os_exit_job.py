"""Rank 1 ends with os._exit(0) after one all-reduce: no status, no trace, exit code 0."""

import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.ones(4)
dist.all_reduce(t)
if dist.get_rank() == 1:
    os._exit(0)
dist.destroy_process_group()
