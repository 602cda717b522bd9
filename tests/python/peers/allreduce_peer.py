"""A peer of test_allreduce.py: joins a world of N, runs a fixed sequence of
collectives with numpy arrays or torch tensors, and saves what it got.

  allreduce_peer.py PORT INDEX WORLD {numpy|torch} OUTDIR
"""

import json
import sys
import time

import numpy as np

import pccl

COUNT = 1001  # not a multiple of the world size: uneven ring chunks
INT_DTYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]
FLOAT_DTYPES = ["float16", "float32", "float64"]
TORCH_DTYPES = ["int8", "uint8", "int16", "int32", "int64", "float16", "float32", "float64"]
OPS = ["SUM", "AVG", "PROD", "MAX", "MIN"]
BITWISE_OPS = ["BAND", "BOR", "BXOR"]  # integer types only


def ops_for(dtype):
    return OPS + (BITWISE_OPS if dtype in INT_DTYPES else [])


def make_data(dtype, op, index, count=COUNT):
    """Peer `index`'s operand: small integers (exact in every type), wrapping for SUM."""
    base = np.arange(count, dtype=np.int64)
    if op == "PROD":
        v = (base * (index + 2) + index) % 7 - 3  # -3..3
    elif op in BITWISE_OPS:
        v = (base * 0x9E3779B1 + index * 0x7F4A7C15) ^ (base << (3 + index * 5))  # varied bits
    elif op == "SUM" and dtype in ("int8", "uint8"):
        v = base * (index + 1) * 37 + index * 101  # large: the sum wraps
    else:
        v = (base * (index + 1) + index * 7) % 61 - 30  # -30..30
    if dtype.startswith("uint") or dtype == "uint8":
        v = v % 256 if dtype == "uint8" else np.abs(v)
    return v.astype(dtype) if dtype.startswith("float") else v.astype(np.int64).astype(dtype)


def join(comm, world):
    for _ in range(600):
        if comm.get_attribute(pccl.Attribute.GLOBAL_WORLD_SIZE) >= world:
            return
        try:
            comm.update_topology()
        except pccl.UpdateTopologyFailed:
            pass
        time.sleep(0.01)
    raise RuntimeError("world never complete")


def main():
    port, index, world, mode, outdir = (int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]),
                                        sys.argv[4], sys.argv[5])
    if mode == "torch":
        import torch

        wrap = torch.from_numpy  # shares the numpy memory: the binding sees a torch tensor
        unwrap = lambda t: t.numpy()  # noqa: E731
        dtypes = TORCH_DTYPES
    else:
        wrap = unwrap = lambda a: a  # noqa: E731
        dtypes = INT_DTYPES + FLOAT_DTYPES
    comm = pccl.Communicator(f"127.0.0.1:{port}", 0, timeout_ms=60000)
    comm.connect(n_attempts=10, retry_delay=0.2)
    join(comm, world)
    out, meta = {}, {"infos": {}}

    # 1) every dtype x op, out of place
    for dt in dtypes:
        for op in ops_for(dt):
            send = wrap(make_data(dt, op, index))
            recv = wrap(np.zeros(COUNT, dtype=dt))
            info = comm.all_reduce(send, recv, op=pccl.ReduceOp[op])
            out[f"{dt}_{op}"] = unwrap(recv).copy()
            meta["infos"][f"{dt}_{op}"] = [info.world_size, info.tx_bytes, info.rx_bytes]

    # 2) in place (send is recv), with an explicit descriptor
    buf = wrap(make_data("int32", "SUM", index))
    info = comm.all_reduce(buf, buf, op=pccl.ReduceOp.SUM, tag=7,
                           operand_descriptor=pccl.ReduceOperandDescriptor(
                               pccl.DataType.INT32, pccl.DistributionHint.NONE),
                           quantization_options=pccl.QuantizationOptions(
                               pccl.DataType.INT32, pccl.QuantizationAlgorithm.NONE))
    out["inplace_int32_SUM"] = unwrap(buf).copy()

    # 3) three async all-reduces in flight at once
    bufs = [wrap(make_data("int64", "SUM", index) * (k + 1)) for k in range(3)]
    handles = [comm.all_reduce_async(b, b, op=pccl.ReduceOp.SUM, tag=100 + k)
               for k, b in enumerate(bufs)]
    waits = [h.wait() for h in reversed(handles)][::-1]
    meta["async"] = [[ok, int(st), inf.world_size, inf.tx_bytes, inf.rx_bytes]
                     for ok, st, inf in waits]
    meta["async_again"] = [list(h.wait()[:2]) for h in handles]  # cached result
    for k, b in enumerate(bufs):
        out[f"async_{k}"] = unwrap(b).copy()

    # 4) quantized traffic (MIN_MAX to uint8): results bit-identical on every peer
    q = wrap((np.sin(np.arange(COUNT) * (index + 1)) * 10).astype(np.float32))
    comm.all_reduce(q, q, op=pccl.ReduceOp.SUM,
                    operand_descriptor=pccl.ReduceOperandDescriptor(pccl.DataType.FLOAT,
                                                                     pccl.DistributionHint.NORMAL),
                    quantization_options=pccl.QuantizationOptions(
                        pccl.DataType.UINT8, pccl.QuantizationAlgorithm.MIN_MAX))
    out["quant_f32_u8"] = unwrap(q).copy()

    # 5) several at once with retry
    ms = [wrap(make_data("int32", "MAX", index) + k) for k in range(3)]
    descs = [pccl.ReduceOpDescriptor.from_arrays(m, m, op=pccl.ReduceOp.MAX, tag=200 + k)
             for k, m in enumerate(ms)]
    comm.all_reduce_multiple_with_retry(descs, max_in_flight=2)
    for k, m in enumerate(ms):
        out[f"multi_{k}"] = unwrap(m).copy()

    # 6) shared state: peer WORLD-1 diverges in "b"; the popular content wins
    a = wrap(np.arange(64, dtype=np.float32) * 0.5)
    b = wrap(np.arange(32, dtype=np.int64) * 3)
    if index == world - 1:
        unwrap(b)[5] = -1
    c_np = np.full(4, 9, dtype=np.uint8)
    state = pccl.SharedState([
        pccl.TensorInfo("a", a, False),
        pccl.TensorInfo.from_torch(b, "b") if mode == "torch" else pccl.TensorInfo.from_numpy(b, "b"),
        pccl.TensorInfo(name="c", data=c_np, allow_content_inequality=False),
    ])
    s1 = comm.sync_shared_state(state)
    state.revision += 1
    s2 = comm.sync_shared_state(state, strategy=pccl.SharedStateSyncStrategy.ENFORCE_POPULAR)
    meta["sync"] = [[s1.tx_bytes, s1.rx_bytes], [s2.tx_bytes, s2.rx_bytes], state.revision]
    out["state_a"], out["state_b"], out["state_c"] = unwrap(a).copy(), unwrap(b).copy(), c_np.copy()

    meta["pending"] = comm.are_peers_pending()
    meta["attrs"] = {a.name: comm.get_attribute(a) for a in
                     (pccl.Attribute.GLOBAL_WORLD_SIZE, pccl.Attribute.PEER_GROUP_WORLD_SIZE,
                      pccl.Attribute.NUM_DISTINCT_PEER_GROUPS,
                      pccl.Attribute.LARGEST_PEER_GROUP_WORLD_SIZE,
                      pccl.Attribute.CURRENT_WORLD_SIZE)}
    meta["rank"] = comm.get_attribute(pccl.Attribute.RANK)
    meta["epoch"] = comm.get_attribute(pccl.Attribute.EPOCH)
    np.savez(f"{outdir}/peer{index}.npz", **out)
    with open(f"{outdir}/peer{index}.json", "w") as f:
        json.dump(meta, f)
    comm.close()
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
