#!/usr/bin/env python3
"""Writes the binary seeds of the fuzz targets (seeds/idx, seeds/checkpoint, seeds/tables) from
their formats: IDX files (tool/data.c), the checkpoint layout (tool/train/state.c: a 128-byte
header, the parameters, Adam's state, the checks' evidence, each rank's metric sums) and
calibrate's tables.  EVIDENCE is sizeof(train_evidence) (tool/train/internal.h) at the time of
writing; a seed made with another size is still a useful start, just refused sooner.
   python3 tests/fuzz/make_seeds.py [EVIDENCE]"""
import os, struct, sys

here = os.path.dirname(os.path.abspath(__file__))
EVIDENCE = int(sys.argv[1]) if len(sys.argv) > 1 else 8528
PARAMS, SAMPLES, RANKS = 10, 64, 4  # as fuzz_checkpoint.c sets its state up


def put(kind, name, data):
    with open(os.path.join(here, "seeds", kind, name), "wb") as f:
        f.write(data)


def idx(magic, dims, body):
    return struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in dims) + body


# IDX: the first byte says where the images end, in 255ths of the rest
images = idx(0x803, [3, 2, 2], bytes(range(12)))
labels = idx(0x801, [3], bytes([0, 1, 2]))
for name, im, lb in [("pair", images, labels), ("count-mismatch", images, idx(0x801, [2], b"\0\1")),
                     ("short-images", images[:-3], labels), ("wrong-magic", idx(0x802, [3, 2], b"\0" * 6), labels)]:
    cut = len(im) * 255 // (len(im) + len(lb))
    while (len(im) + len(lb)) * cut // 255 < len(im):
        cut += 1
    put("idx", name, bytes([cut]) + im + lb)


def checkpoint(real, ranks=2, involved=RANKS):
    nparams, nstate = (PARAMS, 2 * PARAMS) if real else (0, 0)
    parts = 2 * SAMPLES * 4 + involved if real else 0
    head = b"RHCKPT4\0" + struct.pack("<ii", 1, 1)
    head += struct.pack("<6Q", nparams, nstate, EVIDENCE + parts, ranks, involved if real else 0, 0)
    head += struct.pack("<d", 12.0) + struct.pack("<7d", 1, 0, 0, 12, 12, 1, 0)
    body = struct.pack("<%df" % (nparams + nstate), *([0.5] * (nparams + nstate)))
    body += b"\0" * (EVIDENCE + parts) + struct.pack("<%dd" % (3 * ranks), *([1.0] * 3 * ranks))
    return head + body


put("checkpoint", "real", b"\0" + checkpoint(True))
put("checkpoint", "timing", b"\1" + checkpoint(False))
put("checkpoint", "real-truncated", b"\0" + checkpoint(True)[:-5])

# tables: an even first byte is an nccl-tests output, 1 modulo 4 a GEMM sweep, 3 modulo 4 step times
nccl = """# nThread 1 nGpus 1 minBytes 8 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 20
#
# Using devices
#  Rank  0 Group  0 Pid   1234 on     node0 device  0 [0x18] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid   1235 on     node0 device  1 [0x2a] NVIDIA H100 80GB HBM3
# Collective test starting: all_reduce_perf
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1    10.50    0.00    0.00      0    10.20    0.00    0.00      0
     1048576        262144     float     sum      -1    20.10   52.17   52.17      0    19.90   52.69   52.69      0
  1073741824     268435456     float     sum      -1   3100.0  346.37  346.37      0   3098.0  346.59  346.59      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 132.9
"""
put("tables", "nccl-tests", b"\0" + nccl.encode())
put("tables", "gemm", b"\1" + b"# M N K TFLOPS\n1024 1024 1024 37.9\n4096 4096 4096 51.7\n16384 16384 16384 53.0\n")
put("tables", "steps", b"\3" + b"# step times\n100\n101.5\n99\n")
put("tables", "steps-csv", b"\3" + b"step,epoch,lr,loss,step_ms,compute_ms\n1,0,,,100,90\n2,0,,,101,91\n")
