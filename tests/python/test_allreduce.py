"""Exact all-reduce results, async handles and shared state with 3 peer processes:
numpy buffers against ccoip_master, torch tensors against an in-process MasterNode."""

import json
import sys

import numpy as np
import pytest

import harness

sys.path.insert(0, str(harness.HERE / "peers"))
import allreduce_peer as P  # noqa: E402

WORLD = 3


def wrapped(fn, xs):
    r = xs[0].copy()
    for x in xs[1:]:
        r = fn(r, x)  # numpy array arithmetic wraps in the element type, like pccl
    return r


def expected(dt, op, world=WORLD):
    xs = [P.make_data(dt, op, i) for i in range(world)]
    if op == "SUM":
        return wrapped(np.add, xs)
    if op == "PROD":
        return wrapped(np.multiply, xs)
    if op == "MAX":
        return np.maximum.reduce(xs)
    if op == "MIN":
        return np.minimum.reduce(xs)
    if op in P.BITWISE_OPS:
        fn = {"BAND": np.bitwise_and, "BOR": np.bitwise_or, "BXOR": np.bitwise_xor}[op]
        return fn.reduce(xs)
    s = wrapped(np.add, xs)  # AVG
    if np.dtype(dt).kind == "f":
        return (s / np.array(world, dtype=dt)).astype(dt)
    q = [(abs(int(v)) // world) * (1 if int(v) >= 0 else -1) for v in s]  # truncated toward zero
    return np.array(q, dtype=np.int64).astype(dt)


# The runtime master's relay bound (PCCL_RELAY_MAX_BYTES unset: 32 KiB).
RELAY_MAX_BYTES = 32768


def run_peers(procs, tmp_path, port, mode):
    peers = [procs.python(f"peer{i}", harness.HERE / "peers" / "allreduce_peer.py",
                          [port, i, WORLD, mode, tmp_path]) for i in range(WORLD)]
    rcs = harness.wait_all(peers, 90)
    assert rcs == [0] * WORLD, procs.dump()
    res = [dict(np.load(tmp_path / f"peer{i}.npz")) for i in range(WORLD)]
    meta = [json.loads((tmp_path / f"peer{i}.json").read_text()) for i in range(WORLD)]
    return res, meta


def check(res, meta, dtypes):
    for dt in dtypes:
        for op in P.ops_for(dt):
            key = f"{dt}_{op}"
            exp = expected(dt, op)
            for i in range(WORLD):
                got = res[i][key]
                assert got.dtype == np.dtype(dt)
                assert got.tobytes() == exp.tobytes(), (key, i, got[:8], exp[:8])
            infos = [m["infos"][key] for m in meta]
            assert all(inf[0] == WORLD for inf in infos), infos
            # every byte sent on the ring is received by someone
            assert sum(inf[1] for inf in infos) == sum(inf[2] for inf in infos), infos
            nbytes = P.COUNT * np.dtype(dt).itemsize
            for inf in infos:
                if nbytes <= RELAY_MAX_BYTES:
                    # relayed by the master (docs/protocol.md §6.8.2): the input out, the result in
                    assert inf[1] == nbytes and inf[2] == nbytes, inf
                else:
                    # each rank sends about 2(N-1)/N of the buffer (ccoip_ring_elements_sent)
                    assert 2 * nbytes * (WORLD - 1) // WORLD - 2 * np.dtype(dt).itemsize <= inf[1] <= 2 * nbytes, inf
    exp_inplace = expected("int32", "SUM")
    for i in range(WORLD):
        assert np.array_equal(res[i]["inplace_int32_SUM"], exp_inplace)
        for k in range(3):
            xs = [P.make_data("int64", "SUM", j) * (k + 1) for j in range(WORLD)]
            assert np.array_equal(res[i][f"async_{k}"], wrapped(np.add, xs))
            ys = [P.make_data("int32", "MAX", j) + k for j in range(WORLD)]
            assert np.array_equal(res[i][f"multi_{k}"], np.maximum.reduce(ys))
        m = meta[i]
        assert [a[:3] for a in m["async"]] == [[True, 0, WORLD]] * 3, m["async"]
        assert m["async_again"] == [[True, 0]] * 3
        # quantized: same bits everywhere, close to the exact sum
        assert res[i]["quant_f32_u8"].tobytes() == res[0]["quant_f32_u8"].tobytes()
        exact = sum((np.sin(np.arange(P.COUNT) * (j + 1)) * 10).astype(np.float32).astype(np.float64)
                    for j in range(WORLD))
        assert np.max(np.abs(res[i]["quant_f32_u8"] - exact)) < 1.5
        # shared state: the divergent peer received the popular "b"; the others did not receive
        assert np.array_equal(res[i]["state_a"], np.arange(64, dtype=np.float32) * 0.5)
        assert np.array_equal(res[i]["state_b"], np.arange(32, dtype=np.int64) * 3)
        assert np.array_equal(res[i]["state_c"], np.full(4, 9, dtype=np.uint8))
        (tx1, rx1), (tx2, rx2), rev = m["sync"]
        assert rev == 1
        assert rx2 == 0 and tx2 == 0
        if i == WORLD - 1:
            assert rx1 >= 32 * 8, m["sync"]
        else:
            assert rx1 == 0, m["sync"]
        assert m["pending"] is False
        assert m["attrs"] == {"GLOBAL_WORLD_SIZE": WORLD, "PEER_GROUP_WORLD_SIZE": WORLD,
                              "NUM_DISTINCT_PEER_GROUPS": 1, "LARGEST_PEER_GROUP_WORLD_SIZE": WORLD}
    assert sum(m["sync"][0][0] for m in meta) == meta[WORLD - 1]["sync"][0][1]
    # RANK: one position each in the ring, 0 .. WORLD-1; EPOCH: that ring's, the same on all
    assert sorted(m["rank"] for m in meta) == list(range(WORLD)), [m["rank"] for m in meta]
    assert len({m["epoch"] for m in meta}) == 1 and meta[0]["epoch"] > 0, [m["epoch"] for m in meta]


def test_allreduce_numpy_exact(procs, tmp_path, master_port):
    res, meta = run_peers(procs, tmp_path, master_port, "numpy")
    check(res, meta, P.INT_DTYPES + P.FLOAT_DTYPES)


def test_allreduce_torch_exact_with_in_process_master(procs, tmp_path):
    pytest.importorskip("torch")
    import pccl

    with pccl.MasterNode("127.0.0.1:0", heartbeat_ms=100, evict_ms=3000) as master:
        master.run()
        assert master.port > 0
        res, meta = run_peers(procs, tmp_path, master.port, "torch")
    check(res, meta, P.TORCH_DTYPES)
