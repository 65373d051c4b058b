"""Rank 1 raises after one all-reduce; rank 0 finishes."""
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.ones(4)
dist.all_reduce(t)
if dist.get_rank() == 1:
    raise RuntimeError("planted failure on rank 1")
t.add_(1.0)
dist.destroy_process_group()
