"""Rank 1 hangs (sleeps) after one all-reduce; rank 0 finishes."""

import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.ones(4)
dist.all_reduce(t)
if dist.get_rank() == 1:
    time.sleep(3600)
t.add_(1.0)
