"""What the PyTorch judges share: the seeds' networks written in PyTorch from their published
definitions, rehearsal's dropout masks, Fashion-MNIST as rehearsal reads it, and running rehearsal.

The networks are written here from the scripts that define them (Horovod's pytorch_mnist.py Net,
LeNet-5 as PyTorch's tutorials write it, the tf.keras Fashion-MNIST CNN), not from rehearsal's
tables.  Dropout is the one place where the two cannot draw the same numbers from their own
generators, so the judge's dropout applies rehearsal's documented masks (tool/workload/net/net.h):
the keep factor of element i of the op at index `op` of the network's list, at a step whose key
is mix64(seed + 0x9E3779B97F4A7C15 (step + 1)), is 1 / (1 - p) when the top 24 bits of
mix64(key + 0xD1B54A32D192ED03 (op + 1) + 0x9E3779B97F4A7C15 (i + 1)) over 2^24 are at least p,
else 0; i counts elements (Dropout2d: channels) over the step's global batch, sample-major.
"""

import gzip
import json
import os
import subprocess
import sys

import numpy as np

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:  # pragma: no cover
    sys.stderr.write("SKIP: the PyTorch judges need torch (%s); run them with Debian's "
                     "/usr/bin/python3\n" % e)
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DATASETS = os.environ.get("RH_DATASETS", "/usr/share/datasets/fashion-mnist")
MEAN, STD = 0.2860, 0.3530  # Fashion-MNIST's training-set mean and standard deviation

if not os.path.exists(os.path.join(DATASETS, "train-images-idx3-ubyte.gz")):
    sys.stderr.write("SKIP: the PyTorch judges train on Fashion-MNIST: install Debian's "
                     "dataset-fashion-mnist (or point RH_DATASETS at its files)\n")
    sys.exit(77)

U64 = np.uint64


def mix64(z):
    with np.errstate(over="ignore"):
        z = (z ^ (z >> U64(30))) * U64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> U64(27))) * U64(0x94D049BB133111EB)
        return z ^ (z >> U64(31))


def dropout_key(seed, step):
    with np.errstate(over="ignore"):
        return mix64(np.array([seed], dtype=U64) + U64(0x9E3779B97F4A7C15) * U64(step + 1))[0]


def keep_factors(key, op, first, count, p):
    """Keep factors of elements first .. first + count - 1 (float32)."""
    i = np.arange(first, first + count, dtype=U64)
    with np.errstate(over="ignore"):
        z = mix64(U64(key) + U64(0xD1B54A32D192ED03) * U64(op + 1) +
                  U64(0x9E3779B97F4A7C15) * (i + U64(1)))
    u = (z >> U64(40)).astype(np.float64) * 2.0 ** -24
    return np.where(u >= p, np.float32(1.0 / (1.0 - p)), np.float32(0)).astype(np.float32)


class Masks:
    """The current step's dropout: key and this rank's first position in the global batch."""

    def __init__(self):
        self.key, self.first, self.on = 0, 0, True

    def set(self, seed, step, first):
        self.key, self.first = dropout_key(seed, step), first


class Dropout(nn.Module):
    def __init__(self, masks, op, p, channels=False):
        super().__init__()
        self.masks, self.op, self.p, self.channels = masks, op, p, channels

    def forward(self, x):
        if not self.training:
            return x
        b = x.shape[0]
        units = x.shape[1] if self.channels else int(np.prod(x.shape[1:]))
        k = keep_factors(self.masks.key, self.op, self.masks.first * units, b * units, self.p)
        k = torch.from_numpy(k).reshape((b, units) + ((1, 1) if self.channels else ()))
        if not self.channels:
            k = k.reshape(x.shape)
        return x * k


class MnistNet(nn.Module):
    """Horovod's examples/pytorch/pytorch_mnist.py Net (seed 001); its dropouts are ops 4 and 10
    of the list rehearsal reads the network as."""

    def __init__(self, masks):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = Dropout(masks, 4, 0.5, channels=True)
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)
        self.drop = Dropout(masks, 10, 0.5)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        x = self.drop(x)
        return self.fc2(x)


class LeNet5(nn.Module):
    def __init__(self, masks):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(400, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class KerasFmnistCnn(nn.Module):
    """The tf.keras Fashion-MNIST CNN (Conv2D 64 2x2 'same', pool, Dropout 0.3, Conv2D 32 2x2
    'same', pool, Dropout 0.3, Dense 256, Dropout 0.5, Dense 10); Keras's 'same' for an even
    kernel pads the extra row and column after.  Dropouts are ops 3, 7 and 11."""

    def __init__(self, masks):
        super().__init__()
        self.conv2d = nn.Conv2d(1, 64, 2)
        self.conv2d_1 = nn.Conv2d(64, 32, 2)
        self.dense = nn.Linear(32 * 7 * 7, 256)
        self.dense_1 = nn.Linear(256, 10)
        self.d1, self.d2 = Dropout(masks, 3, 0.3), Dropout(masks, 7, 0.3)
        self.d3 = Dropout(masks, 11, 0.5)

    def forward(self, x):
        x = self.d1(F.max_pool2d(F.relu(self.conv2d(F.pad(x, (0, 1, 0, 1)))), 2))
        x = self.d2(F.max_pool2d(F.relu(self.conv2d_1(F.pad(x, (0, 1, 0, 1)))), 2))
        x = self.d3(F.relu(self.dense(torch.flatten(x, 1))))
        return self.dense_1(x)


NETS = {"mnist_net": MnistNet, "lenet5": LeNet5, "keras_fmnist_cnn": KerasFmnistCnn}


def load_fmnist(train=True, n=None, mean=MEAN, std=STD):
    """Images as rehearsal reads them: bytes / 255 in float32, then (x - mean) / std computed in
    double and rounded to float32; labels as int64."""
    stem = "train" if train else "t10k"
    with gzip.open(os.path.join(DATASETS, stem + "-images-idx3-ubyte.gz")) as f:
        raw = np.frombuffer(f.read(), dtype=np.uint8, offset=16)
    with gzip.open(os.path.join(DATASETS, stem + "-labels-idx1-ubyte.gz")) as f:
        labels = np.frombuffer(f.read(), dtype=np.uint8, offset=8).astype(np.int64)
    x = raw.reshape(-1, 1, 28, 28)
    if n is not None:
        x, labels = x[:n], labels[:n]
    x = x.astype(np.float32) / np.float32(255)
    x = ((x.astype(np.float64) - mean) / std).astype(np.float32)
    return torch.from_numpy(x), torch.from_numpy(labels)


def write_params(model, path):
    """The model's state_dict in order as float32 little-endian: model.init_from's format."""
    with open(path, "wb") as f:
        for v in model.state_dict().values():
            f.write(v.detach().numpy().astype("<f4").tobytes())


def read_params(out_dir):
    """A run's params.bin, split into tensors by summary.json's index."""
    with open(os.path.join(out_dir, "summary.json")) as f:
        index = json.load(f)["parameters_file"]
    flat = np.fromfile(os.path.join(out_dir, index["file"]), dtype="<f4")
    assert flat.size == index["count"], (flat.size, index["count"])
    out = {}
    for t in index["tensors"]:
        n = int(np.prod(t["shape"]))
        out[t["name"]] = flat[t["offset"]:t["offset"] + n].reshape(t["shape"])
    return out


def steps_csv(out_dir):
    import csv
    with open(os.path.join(out_dir, "steps.csv")) as f:
        return list(csv.DictReader(f))


def rehearsal(program, scenario, out_dir, *sets):
    cmd = [program, "run", scenario, "--out", out_dir, "--record-samples"]
    for s in sets:
        cmd += ["--set", s]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stdout[-4000:] + r.stderr[-4000:])
        raise SystemExit("rehearsal failed (%d): %s" % (r.returncode, " ".join(cmd)))
    return r.stdout


def program():
    p = os.environ.get("REHEARSAL")
    if not p:
        p = os.path.join(ROOT, "build", "tool", "rehearsal")
    return p


def max_rel(a, b):
    """Largest difference over the largest magnitude of the reference b."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))
