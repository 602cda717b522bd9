import torch
import torchcomms

# Create a communicator
store = torch.distributed.FileStore("/tmp/torchcomm_test", 2)
device = torch.device("cuda:0")
comm = torchcomms.new_comm("nccl", device, store=store)

rank = comm.get_rank()
world_size = comm.get_size()

# Create tensors
send_tensor = torch.ones(10, device=device) * rank
recv_tensor = torch.zeros(10, device=device)

# Perform asynchronous send and receive
if rank == 0:
    work = comm.send(send_tensor, dst=1, async_op=True)
else:
    work = comm.recv(recv_tensor, src=0, async_op=True)

# Do other work while communication is in progress
# ...

# Wait for the operation to complete
work.wait()

# Finalize the communicator
comm.finalize()
