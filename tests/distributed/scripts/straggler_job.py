"""A 2-rank gloo job with a planted straggler: rank $SLOW_RANK does 30 ms of Python work before each
all-reduce of a tiny tensor. Marks its steps for workbench's step window. Usage: straggler_job.py [STEPS]"""

import os
import sys
import time

import torch
import torch.distributed as dist

import workbench.api.distributed as wd

SLOW_RANK = int(os.environ.get("SLOW_RANK", "1"))
EXTRA_S = 0.030
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 8

dist.init_process_group("gloo")
t = torch.ones(256)
dist.all_reduce(t)
for _ in range(steps):
    if dist.get_rank() == SLOW_RANK:
        end = time.perf_counter() + EXTRA_S
        while time.perf_counter() < end:
            pass
    t.add_(1.0)
    dist.all_reduce(t)
    wd.step()
dist.destroy_process_group()
