"""CUDA support of the loaded libpccl (PCCL's pccl.cuda module)."""


def is_available():
    """Whether libpccl was built with CUDA support (pccl's never is: CPU memory only)."""
    from ._core import get_build_info

    return get_build_info().has_cuda_support
