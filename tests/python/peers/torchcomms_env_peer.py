"""A peer of test_torchcomms.py: new_comm without a store (torchrun's environment, or
PCCL_MASTER_ADDR), then an all-reduce MAX of rank + 1; prints its rank beside RANK (the ring
is ordered by RANK: pcclCommCreateOptions_t.ring_key)."""

import os

import torch

from pccl import torchcomms

comm = torchcomms.new_comm("pccl", "cpu")
t = torch.ones(5) * (comm.get_rank() + 1)
comm.all_reduce(t, torchcomms.ReduceOp.MAX, async_op=False)
print(f"rank {comm.get_rank()} env {os.environ.get('RANK')} size {comm.get_size()} max {int(t[0])}",
      flush=True)
comm.finalize()
