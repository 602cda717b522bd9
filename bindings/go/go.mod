module pccl.dev/pccl

go 1.19
