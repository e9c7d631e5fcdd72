#!/usr/bin/env python3
"""PyTorch peer for bench/data_parallel.cpp: DistributedDataParallel (gloo)
on the Keras MNIST CNN, 2 processes x 1 thread, measured the way
ddl_bench_data_parallel measures ddl, in short interleaved blocks within
one job. Each round runs --steps training steps (Adadelta) of:
  1 rank    rank 0 alone at the global batch, the others waiting;
  no comm   every rank on its own at batch/N, without communicating;
  ddp       DDP at batch/N per rank (gloo over 127.0.0.1, 25 MiB buckets,
            PyTorch's defaults).
Efficiency = rate / (N x the 1-rank rate) per round; medians over rounds.
Run it from the peers' virtual environment, with glibc's malloc keeping its
freed memory as in torch_cnn_step.py:
  GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967296 \\
      bench/.venv-peers/bin/python3 bench/torch_ddp_step.py --rounds 20 --steps 5 --channels-last
"""
import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

from torch_cnn_step import keras_mnist_cnn


def make(args, batch):
    model = keras_mnist_cnn()
    x = torch.randn(batch, 1, 28, 28)
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
        x = x.to(memory_format=torch.channels_last)
    y = torch.randint(0, 10, (batch,))
    return model, x, y


def trainer(model, x, y):
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    loss_fn = nn.CrossEntropyLoss()

    def step():
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()
    return step


def worker(rank, args):
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(1 + rank)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank, world_size=args.ranks)
    per_rank = args.batch // args.ranks
    alone = trainer(*make(args, args.batch)) if rank == 0 else None
    own = trainer(*make(args, per_rank))
    model, x, y = make(args, per_rank)
    ddp = trainer(nn.parallel.DistributedDataParallel(model), x, y)

    def timed(step):  # seconds for --steps steps, the slowest rank's
        dist.barrier()
        start = time.perf_counter()
        if step is not None:
            for _ in range(args.steps):
                step()
        dist.barrier()
        return time.perf_counter() - start

    for step in (alone, own, ddp):  # warm-up: allocations, oneDNN primitives, DDP's buckets
        timed(step)
    rates = {"1 rank": [], "no comm": [], "ddp": []}
    for _ in range(args.rounds):
        rates["1 rank"].append(args.steps * args.batch / timed(alone))
        rates["no comm"].append(args.steps * args.batch / timed(own))
        rates["ddp"].append(args.steps * args.batch / timed(ddp))
    if rank == 0:
        print(f"# pytorch {torch.__version__} DDP gloo, mnist_cnn, global batch {args.batch} over {args.ranks} ranks x "
              f"{args.threads} thread(s), channels_last {args.channels_last}; {args.rounds} rounds of {args.steps} steps")
        print(f"{'config':<12}{'samples/s':>12}{'efficiency':>12}{'eff. min':>10}{'eff. max':>10}")
        for name, values in rates.items():
            row = f"{name:<12}{statistics.median(values):>12.0f}"
            if name != "1 rank":
                eff = [r / (args.ranks * b) for r, b in zip(values, rates["1 rank"])]
                row += f"{statistics.median(eff):>12.1%}{min(eff):>10.1%}{max(eff):>10.1%}"
            print(row)
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads per rank")
    parser.add_argument("--batch", type=int, default=128, help="global batch")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--channels-last", action="store_true")
    parser.add_argument("--port", type=int, default=29517)
    args = parser.parse_args()
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    mp.spawn(worker, args=(args,), nprocs=args.ranks)


if __name__ == "__main__":
    main()
