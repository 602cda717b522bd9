"""The reference MNIST example (reference/mnist.py, verbatim from PCCL's docs)
with 3 peers, one SIGKILLed and restarted mid-training.

Edits (each applied to exactly one place of the verbatim text):
  * data: scikit-learn's bundled 8x8 digits set instead of torchvision's MNIST
    download (no torchvision, no network): input size 64, pixels scaled to
    [0, 1] as ToTensor does, a fixed 80/20 train/test split, the same
    DataLoaders;
  * torch.cuda.synchronize is skipped when torch has no CUDA (Debian's is CPU-only);
  * log_info, which the reference uses without defining, is print;
  * harness: the master address comes from the environment (port 0 master).
IS_CI=1 (the reference's own switch) selects its 512-step run. The shared
state hash is printed by peers/mnist_wrapper.py after the unmodified main().
"""

import re
import signal
import time

import harness

N_PEERS = 3
MAX_STEPS = 512  # the reference's IS_CI value
KILL_AT_REVISION = 150

EDITS = [
    ("from torchvision import datasets, transforms\n",
     "from sklearn.datasets import load_digits  # edit: digits instead of MNIST\n"
     "from sklearn.model_selection import train_test_split  # edit\n"
     "from torch.utils.data import TensorDataset  # edit\n"
     "log_info = print  # edit: log_info is used but not defined by the reference\n"),
    ("input_size = 28 * 28  # MNIST images are 28x28",
     "input_size = 8 * 8  # edit: digits images are 8x8"),
    ("train_dataset = datasets.MNIST(root='./data', train=True, transform=transforms.ToTensor(), download=True)\n"
     "test_dataset = datasets.MNIST(root='./data', train=False, transform=transforms.ToTensor(), download=True)\n",
     "_digits = load_digits()  # edit: the data set\n"
     "_x_train, _x_test, _y_train, _y_test = train_test_split(\n"
     "    (_digits.data / 16.0).astype('float32'), _digits.target.astype('int64'), test_size=0.2, random_state=0)\n"
     "train_dataset = TensorDataset(torch.from_numpy(_x_train), torch.from_numpy(_y_train))\n"
     "test_dataset = TensorDataset(torch.from_numpy(_x_test), torch.from_numpy(_y_test))\n"),
    ("            torch.cuda.synchronize(device)\n",
     "            if torch.cuda.is_available():  # edit: CPU-only torch\n"
     "                torch.cuda.synchronize(device)\n"),
    ("HOST: str = '127.0.0.1:48148'",
     "HOST: str = os.environ['PCCL_TEST_MASTER']  # edit: test master address"),
]

REV_RE = re.compile(r"loss: [^,]+, revision: (\d+)")
ACC_RE = re.compile(r"Test Accuracy: ([0-9.]+)%")
HASH_RE = re.compile(r"SHARED_STATE_HASH ([0-9a-f]{64}) revision (\d+) tensors (\d+)")


def last_revision(pr):
    revs = [int(m) for m in REV_RE.findall(pr.output())]
    return revs[-1] if revs else 0


def test_mnist_reference_kill_and_restart(procs, tmp_path, master_port):
    src = (harness.HERE / "reference" / "mnist.py").read_text()
    script = tmp_path / "mnist.py"
    script.write_text(harness.apply_edits(src, EDITS))
    wrapper = harness.HERE / "peers" / "mnist_wrapper.py"

    def start(name, rank):
        cwd = tmp_path / name
        cwd.mkdir()
        env = harness.child_env(PCCL_TEST_MASTER=f"127.0.0.1:{master_port}", RANK=rank, IS_CI=1)
        return procs.python(name, wrapper, [script], env=env, cwd=cwd)

    peers = [start(f"peer{r}", r) for r in range(N_PEERS)]
    victim = peers[2]
    t0 = time.monotonic()
    assert harness.wait_for(
        lambda: last_revision(victim) >= KILL_AT_REVISION or any(p.p.poll() is not None for p in peers),
        120), procs.dump()
    assert all(p.p.poll() is None for p in peers), procs.dump()
    victim.kill(signal.SIGKILL)
    assert victim.wait(10) == -signal.SIGKILL
    killed_at = last_revision(peers[0])
    restarted = start("peer2-restarted", 2)
    survivors = [peers[0], peers[1], restarted]
    rcs = harness.wait_all(survivors, max(30.0, 200 - (time.monotonic() - t0)))
    assert rcs == [0, 0, 0], procs.dump()

    hashes = []
    for pr in survivors:
        out = pr.output()
        assert "Training completed" in out, procs.dump()
        acc = [float(a) for a in ACC_RE.findall(out)]
        assert len(acc) == 1 and acc[0] >= 90.0, (pr.name, acc, procs.dump())
        hs = HASH_RE.findall(out)
        assert len(hs) == 1, procs.dump()
        assert int(hs[0][1]) == MAX_STEPS
        hashes.append(hs[0][0])
        print(f"{pr.name}: accuracy {acc[0]}% shared state {hs[0][0]} revision {hs[0][1]} "
              f"tensors {hs[0][2]}")
    assert hashes[0] == hashes[1] == hashes[2], hashes
    # the restarted peer joined mid-training and adopted the group's revision and content
    first_rev = min(int(m) for m in REV_RE.findall(restarted.output()))
    assert first_rev > KILL_AT_REVISION, first_rev
    assert killed_at >= KILL_AT_REVISION
