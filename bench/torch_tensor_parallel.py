#!/usr/bin/env python3
"""PyTorch peer for ddl's tensor parallelism: Megatron's pairs on the CPU.

The model is ddl's wide_mlp (bench/torch_pipeline.py builds it), trained
with --optimizer (adadelta, as ddl-train's default, or sgd) on random 28x28
inputs and 10-class labels. --mode picks how --ranks processes
(torch.multiprocessing spawn, gloo on 127.0.0.1, --threads intra-op
threads each) share it:

  tensor  torch.distributed.tensor.parallel over a 1-D CPU device mesh:
          ColwiseParallel on Linear 1, 5, 9, 13 and RowwiseParallel on
          Linear 3, 7, 11, 15 (ddl's plan for wide_mlp); every rank reads
          the whole global batch, as a tensor group does
  data    DistributedDataParallel (25 MiB buckets), each rank its share
          of the global batch

Prints samples/s over the timed steps after --warmup steps, over every
step (as ddl-train's epoch figure counts), and each rank's peak RSS.

  bench/.venv-peers/bin/python3 bench/torch_tensor_parallel.py --mode tensor --ranks 2
"""
import argparse

# torch_pipeline re-executes this script under its malloc settings when they
# are not set (faster for PyTorch), before torch is imported.
from torch_pipeline import join_group, make_optimizer, spawn_ranks, train_and_report, wide_mlp_layers

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

COLUMNS = (1, 5, 9, 13)
ROWS = (3, 7, 11, 15)


def wrap(args, model):
    """The model as --mode spreads it over the ranks."""
    if args.mode == "data":
        return nn.parallel.DistributedDataParallel(model)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    mesh = init_device_mesh("cpu", (args.ranks,))
    plan = {str(i): ColwiseParallel() for i in COLUMNS}
    plan.update({str(i): RowwiseParallel() for i in ROWS})
    return parallelize_module(model, mesh, plan)


def worker(rank, args, port):
    join_group(rank, args, port)
    torch.manual_seed(1)  # every rank starts from the same weights, as in ddl
    model = wrap(args, wide_mlp_layers(0, 16))
    optimizer = make_optimizer(args, model.parameters())
    # A tensor group's ranks all read the same batch; data-parallel ranks each their share.
    per_rank = args.batch if args.mode == "tensor" else args.batch // args.ranks
    generator = torch.Generator().manual_seed(1 if args.mode == "tensor" else 1 + rank)
    x = torch.randn(per_rank, 1, 28, 28, generator=generator)
    y = torch.randint(0, 10, (per_rank,), generator=generator)
    train_and_report(rank, args, model, optimizer, x, y,
                     f"torch {torch.__version__} {args.mode} parallelism, {args.ranks} ranks x {args.threads} thread(s), "
                     f"global batch {args.batch}, {args.optimizer} lr {args.lr}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("tensor", "data"), default="tensor")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch", type=int, default=128, help="global batch")
    parser.add_argument("--optimizer", choices=("adadelta", "sgd"), default="adadelta")
    parser.add_argument("--lr", type=float, default=1.0)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()
    if args.batch % args.ranks:
        parser.error(f"--batch {args.batch} does not divide over --ranks {args.ranks}")
    spawn_ranks(worker, args)


if __name__ == "__main__":
    main()
