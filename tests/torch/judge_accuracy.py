"""PyTorch judges what the seed-001 recipe learns: Fashion-MNIST accuracy after its 10 epochs, on
1 worker and on 4, rehearsal against PyTorch.

    REHEARSAL=build/tool/rehearsal /usr/bin/python3 tests/torch/judge_accuracy.py

The recipe (scenarios/seeds/lenet5-mnist-pytorch.yaml, Horovod's pytorch_mnist.py as seeds 001 and
004 run it): the Net, SGD with lr 0.01 x size and momentum 0.5, batch 64 per worker, 10 epochs,
DistributedSampler (its default seed 0, as the script builds it) with set_epoch from 1, the test set of 10,000 for validation, images normalised
with the script's MNIST constants.  PyTorch runs it as the script does: its own nn.Dropout2d and
F.dropout, DistributedDataParallel over gloo for 4 workers.  rehearsal replays the same scenario
from the same initial weights on 1 and 4 simulated GPUs.  Each final accuracy must be within 1
point of PyTorch's (both printed).  Minutes of one core for each of the four trainings.
"""

import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import judge  # noqa: E402
from judge import torch, F, nn, np  # noqa: E402

import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

SCENARIO = os.path.join(judge.ROOT, "scenarios", "seeds", "lenet5-mnist-pytorch.yaml")
EPOCHS, BATCH, SEED, LR, MOMENTUM, MEAN, STD = 10, 64, 42, 0.01, 0.5, 0.1307, 0.3081
BOUND = 1.0  # points


class Net(nn.Module):
    """pytorch_mnist.py's Net, dropout and all, as the script writes it."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        return self.fc2(x)


def normalised(train):
    """The script's transform: ToTensor then Normalize((0.1307,), (0.3081,))."""
    return judge.load_fmnist(train, None, MEAN, STD)


def worker(rank, world, init_path, out_path, port):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.set_num_threads(1)
    torch.manual_seed(SEED + rank)
    if world > 1:
        dist.init_process_group("gloo", rank=rank, world_size=world)
    model = Net()
    model.load_state_dict(torch.load(init_path))
    net = DDP(model) if world > 1 else model
    x, y = normalised(True)
    data = torch.utils.data.TensorDataset(x, y)
    # as the script: no seed given, so DistributedSampler's own 0 (SEED is torch.manual_seed's)
    sampler = torch.utils.data.distributed.DistributedSampler(data, num_replicas=world, rank=rank)
    loader = torch.utils.data.DataLoader(data, batch_size=BATCH, sampler=sampler)
    opt = torch.optim.SGD(net.parameters(), lr=LR * world, momentum=MOMENTUM)
    for epoch in range(1, EPOCHS + 1):
        net.train()
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(net(xb), yb).backward()
            opt.step()
    if rank == 0:
        model.eval()
        xt, yt = normalised(False)
        with torch.no_grad():
            acc = (model(xt).argmax(1) == yt).double().mean().item()
        with open(out_path, "w") as f:
            json.dump({"accuracy": acc}, f)
    if world > 1:
        dist.destroy_process_group()


def pytorch_accuracy(tmp, init_path, world, port):
    out = os.path.join(tmp, "torch-%d.json" % world)
    if world == 1:
        worker(0, 1, init_path, out, port)
    else:
        mp.spawn(worker, args=(world, init_path, out, port), nprocs=world, join=True)
    with open(out) as f:
        return json.load(f)["accuracy"]


def rehearsal_accuracy(tmp, init_bin, world):
    out = os.path.join(tmp, "rehearsal-%d" % world)
    nodes, per = (1, 1) if world == 1 else (2, 2)
    judge.rehearsal(judge.program(), SCENARIO, out, "model.init_from=" + init_bin,
                    "cluster.nodes=%d" % nodes, "cluster.gpus_per_node=%d" % per,
                    "checks.serial_equivalence=false", "checks.resume_equivalence=false")
    with open(os.path.join(out, "summary.json")) as f:
        return json.load(f)["epochs"][-1]["val_accuracy"]


def main():
    torch.manual_seed(SEED)
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        model = Net()
        init_pt, init_bin = os.path.join(tmp, "init.pt"), os.path.join(tmp, "init.bin")
        torch.save(model.state_dict(), init_pt)
        judge.write_params(model, init_bin)
        port = 29600 + os.getpid() % 1000
        for world in (1, 4):
            ours = rehearsal_accuracy(tmp, init_bin, world)
            theirs = pytorch_accuracy(tmp, init_pt, world, port + world)
            diff = 100 * (ours - theirs)
            print("%d worker%s, %d epochs: rehearsal %.2f%%, PyTorch %.2f%% (%+.2f points, bound %g)"
                  % (world, "" if world == 1 else "s", EPOCHS, 100 * ours, 100 * theirs, diff,
                     BOUND))
            if abs(diff) > BOUND:
                failed.append("%d workers" % world)
    if failed:
        raise SystemExit("judge_accuracy: beyond %g point on %s" % (BOUND, ", ".join(failed)))
    print("judge_accuracy: 2 passed, 0 failed")


if __name__ == "__main__":
    main()
