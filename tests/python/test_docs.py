"""The complete example of docs/python.md, run as written with a master and two peers."""

import re

import harness


def test_docs_example_runs(procs, tmp_path, master_port):
    text = (harness.REPO / "docs" / "python.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 1
    script = tmp_path / "peer.py"
    script.write_text(blocks[0])
    peers = [procs.python(f"peer{i}", script, [f"127.0.0.1:{master_port}"]) for i in range(2)]
    assert harness.wait_all(peers, 60) == [0, 0], procs.dump()
    for pr in peers:
        lines = [l for l in pr.output().splitlines() if l.startswith("revision ")]
        assert lines, procs.dump()
        last = lines[-1].split()
        # revision 10 world 2 tx T rx R w[0] -1.00
        assert last[:4] == ["revision", "10", "world", "2"] and last[-1] == "-1.00", lines[-1]
        assert int(last[5]) > 0 and int(last[7]) > 0
