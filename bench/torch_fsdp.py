#!/usr/bin/env python3
"""PyTorch peer for ddl's sharded data parallelism: ZeRO stages on the CPU.

The model is ddl's wide_mlp (bench/torch_pipeline.py builds it), trained
with Adam (lr 1e-3, PyTorch's defaults otherwise, as ddl-train --optimizer
adam) on random 28x28 inputs and 10-class labels, global batch --batch
split over --ranks processes (torch.multiprocessing spawn, gloo on
127.0.0.1), --threads intra-op threads each. --stage picks PyTorch's
counterpart of ddl-train's --shard:

  0   DistributedDataParallel (25 MiB buckets, PyTorch's defaults);
  1   DDP with ZeroRedundancyOptimizer (each rank updates and keeps the
      Adam state of its share of the parameters, then broadcasts them);
  2   FSDP2, fully_shard on every Linear and on the root with
      reshard_after_forward=False (the parameters stay gathered from
      forward to backward: FSDP's SHARD_GRAD_OP, ZeRO-2's memory);
  3   FSDP2 with reshard_after_forward=True (ZeRO-3: gathered before each
      layer's forward and again before its backward; FSDP2 prefetches the
      next layer's gather by default).

Prints samples/s over the timed steps after --warmup steps, over every
step (as ddl-train's epoch figure counts), and each rank's peak RSS
(getrusage ru_maxrss), after the set-up and at the end.

  bench/.venv-peers/bin/python3 bench/torch_fsdp.py --stage 3 --ranks 2
"""
import argparse

# torch_pipeline re-executes this script under its malloc settings when they
# are not set (faster for PyTorch), before torch is imported.
from torch_pipeline import join_group, spawn_ranks, train_and_report, wide_mlp_layers

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

STAGES = {0: "DDP", 1: "DDP + ZeroRedundancyOptimizer", 2: "FSDP2 reshard_after_forward=False",
          3: "FSDP2 reshard_after_forward=True"}


def wrap(args, model):
    """The model and its optimizer, sharded as --stage says."""
    if args.stage <= 1:
        model = nn.parallel.DistributedDataParallel(model)
        if args.stage == 0:
            return model, torch.optim.Adam(model.parameters(), lr=1e-3)
        from torch.distributed.optim import ZeroRedundancyOptimizer
        return model, ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam, lr=1e-3)
    from torch.distributed.fsdp import fully_shard
    reshard = args.stage == 3
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, reshard_after_forward=reshard)
    fully_shard(model, reshard_after_forward=reshard)
    return model, torch.optim.Adam(model.parameters(), lr=1e-3)


def worker(rank, args, port):
    join_group(rank, args, port)
    torch.manual_seed(1)  # every rank starts from the same weights, as in ddl
    model, optimizer = wrap(args, wide_mlp_layers(0, 16))
    per_rank = args.batch // args.ranks
    generator = torch.Generator().manual_seed(1 + rank)
    x = torch.randn(per_rank, 1, 28, 28, generator=generator)
    y = torch.randint(0, 10, (per_rank,), generator=generator)
    train_and_report(rank, args, model, optimizer, x, y,
                     f"torch {torch.__version__} stage {args.stage} ({STAGES[args.stage]}), {args.ranks} ranks x "
                     f"{args.threads} thread(s), global batch {args.batch}, adam lr 1e-3")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stage", type=int, choices=sorted(STAGES), default=3)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch", type=int, default=128, help="global batch")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()
    if args.batch % args.ranks:
        parser.error(f"--batch {args.batch} does not divide over --ranks {args.ranks}")
    spawn_ranks(worker, args)


if __name__ == "__main__":
    main()
