"""Rank 1 raises after one all-reduce; rank 0 finishes.

Rank 1 raises only once rank 0 has written its status (after its trace): torchrun stops the other
ranks as soon as one fails, so without the wait a loaded machine could stop rank 0 mid-export and the
test would see "terminated" instead of the rank that finished.
"""

import os
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.ones(4)
dist.all_reduce(t)
if dist.get_rank() == 1:
    done = os.path.join(os.environ["WORKBENCH_PROFILE_DIR"], "rank-0.status")
    deadline = time.monotonic() + 60.0
    while not os.path.exists(done) and time.monotonic() < deadline:
        time.sleep(0.05)
    raise RuntimeError("planted failure on rank 1")
t.add_(1.0)
dist.destroy_process_group()
