"""The tuner from Python (docs/algorithms.md): Communicator.tune / tune_save / get_algorithm
on real processes -- every member saves the same table, AUTO resolves alike everywhere, and
every algorithm forced through pcclCollectiveOptions_t.algorithm is exact."""

import pytest

import harness


@pytest.mark.timeout_s(60)
@pytest.mark.parametrize("world", [2, 3])
def test_tune_one_table_everywhere(procs, tmp_path, world):
    port = harness.start_master(procs)
    peers = [procs.python(f"peer{i}", harness.HERE / "peers" / "tune_peer.py",
                          [port, world, tmp_path / f"table{i}.txt"]) for i in range(world)]
    assert harness.wait_all(peers, 60) == [0] * world, procs.dump()
    tables = [(tmp_path / f"table{i}.txt").read_text() for i in range(world)]
    assert all(t == tables[0] for t in tables), tables
    row = next(line for line in tables[0].splitlines() if line.startswith(f"world {world}:"))
    names = row.split(":")[1].split()
    assert len(names) == 19 and names[7:] == ["auto"] * 12, row
    assert all(n in ("relay", "direct", "ring", "ring_striped", "halving_doubling")
               for n in names[:7]), row
    autos = {p.output().split("AUTO 4096 ")[1].split()[0] for p in peers}
    assert len(autos) == 1, autos
    assert autos.pop().lower() == names[2], (row, [p.output() for p in peers])
    assert all("FORCED ok" in p.output() for p in peers), procs.dump()


def test_algorithm_enum_matches_the_header():
    import pccl
    assert [a.name for a in pccl.Algorithm] == ["AUTO", "RELAY", "DIRECT", "RING",
                                                 "RING_STRIPED", "HALVING_DOUBLING"]
    assert [int(a) for a in pccl.Algorithm] == [0, 1, 2, 3, 4, 5]
