import torch
import torchcomms

# Create a store for rendezvous
store = torch.distributed.FileStore("/tmp/torchcomm_test", 2)

# Create a communicator
device = torch.device("cuda:0")
comm = torchcomms.new_comm("nccl", device, store=store)

# Get rank and world size
rank = comm.get_rank()
world_size = comm.get_size()

# Create a tensor
tensor = torch.ones(10, device=device) * rank

# Perform an all-reduce operation
comm.all_reduce(tensor, torchcomms.ReduceOp.SUM, async_op=False)

# Tensor now contains the sum of all ranks
print(f"Rank {rank}: {tensor}")

# Finalize the communicator
comm.finalize()
