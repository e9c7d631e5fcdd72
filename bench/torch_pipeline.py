#!/usr/bin/env python3
"""PyTorch peer for ddl's pipeline: torch.distributed.pipelining on the CPU.

The model is ddl's wide_mlp, the 784-4096x7-10 MLP (Flatten,
Dense 784->4096, ReLU, 6 x (Dense 4096->4096, ReLU), Dense 4096->10: 16
layers, 103,944,202 parameters), trained on random 28x28 inputs and 10-class
labels with cross-entropy (batch mean) and SGD, as ddl-train --optimizer sgd.

  --stages 1   a plain training loop in this process (the baseline); with
               --micro-batches M > 1, gradient accumulation over M slices
               of each batch, one optimizer step per batch (a pipeline's
               arithmetic without its bubble or messages);
  --stages P   P processes (torch.multiprocessing spawn, gloo on 127.0.0.1),
               each holding only its stage's layers, PipelineStage +
               ScheduleGPipe or Schedule1F1B with --micro-batches M; or
               two stages each (2P in all) under ScheduleInterleaved1F1B
               (rank r holds stages r and r + P), ScheduleZBVZeroBubble or
               ScheduleDualPipeV (stages r and 2P - 1 - r: a V), as ddl's
               interleaved-1f1b and zb-v place their chunks.

Each process runs --threads intra-op threads and 1 inter-op thread, under
a larger glibc malloc threshold (faster for PyTorch; the script re-executes
itself with GLIBC_TUNABLES set when it is not). Prints samples/s over the
timed steps after --warmup steps, samples/s over every step (warm-up
included, as ddl-train's epoch figure counts), and each rank's peak RSS
(getrusage ru_maxrss), after importing torch and at the end.

  bench/.venv-peers/bin/python3 bench/torch_pipeline.py --stages 2 --micro-batches 4 --schedule 1f1b
"""
import os
import sys

TUNABLES = "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967296"
if os.environ.get("GLIBC_TUNABLES") != TUNABLES:
    os.environ["GLIBC_TUNABLES"] = TUNABLES
    os.execv(sys.executable, [sys.executable] + sys.argv)

import argparse  # noqa: E402
import resource  # noqa: E402
import socket  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn as nn  # noqa: E402


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def wide_mlp_layers(first, last):
    """Layers [first, last) of ddl's wide_mlp, in ddl's numbering."""
    width = 4096
    makers = [lambda: nn.Flatten(), lambda: nn.Linear(784, width), lambda: nn.ReLU()]
    for _ in range(6):
        makers += [lambda: nn.Linear(width, width), lambda: nn.ReLU()]
    makers.append(lambda: nn.Linear(width, 10))
    assert len(makers) == 16
    return nn.Sequential(*(make() for make in makers[first:last]))


# --schedule: PyTorch's class, and where each rank's model stages lie
# (None: one stage per rank).
SCHEDULES = {
    "gpipe": ("ScheduleGPipe", None),
    "1f1b": ("Schedule1F1B", None),
    "interleaved-1f1b": ("ScheduleInterleaved1F1B", "looped"),
    "zb-v": ("ScheduleZBVZeroBubble", "v"),
    "dualpipev": ("ScheduleDualPipeV", "v"),
}


def model_stages(args):
    """How many model stages the schedule cuts the layers into."""
    return args.stages * (1 if SCHEDULES[args.schedule][1] is None else 2)


def stages_of_rank(rank, args):
    """The model stages rank `rank` holds, in the order the schedule takes them."""
    layout, p = SCHEDULES[args.schedule][1], args.stages
    if layout is None:
        return [rank]
    return [rank, rank + p] if layout == "looped" else [rank, 2 * p - 1 - rank]


def stage_bounds(split, stages):
    starts = [0] + split + [16]
    assert len(starts) == stages + 1, f"--split needs {stages - 1} cut(s), got {split}"
    return list(zip(starts[:-1], starts[1:]))


def make_optimizer(args, parameters):
    if args.optimizer == "sgd":
        return torch.optim.SGD(parameters, lr=args.lr)
    return torch.optim.Adadelta(parameters, lr=args.lr, rho=0.95, eps=1e-7)


def set_threads(threads):
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)


def timed_steps(step, warmup, steps, barrier=lambda: None):
    """Runs `warmup` then `steps` calls of step(); the times (perf_counter)
    at the start, after the warm-up and at the end, each after `barrier`, so
    a distributed run's timed steps end when its slowest rank ends."""
    barrier()
    start = time.perf_counter()
    for _ in range(warmup):
        step()
    barrier()
    timed = time.perf_counter()
    for _ in range(steps):
        step()
    barrier()
    return start, timed, time.perf_counter()


def batch(args):
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(args.batch, 1, 28, 28, generator=generator)
    y = torch.randint(0, 10, (args.batch,), generator=generator)
    return x, y


def single_process(args):
    set_threads(args.threads)
    rss_import = peak_rss_mib()
    torch.manual_seed(1)
    model = wide_mlp_layers(0, 16)
    optimizer = make_optimizer(args, model.parameters())
    loss_fn = nn.CrossEntropyLoss()
    x, y = batch(args)

    xs, ys = x.tensor_split(args.micro_batches), y.tensor_split(args.micro_batches)

    def step():
        optimizer.zero_grad(set_to_none=True)
        for xm, ym in zip(xs, ys):  # each slice's loss counts with its share of the batch
            loss = loss_fn(model(xm), ym) * (len(ym) / args.batch)
            loss.backward()
        optimizer.step()

    start, timed, end = timed_steps(step, args.warmup, args.steps)
    report(args, [dict(rank=0, layers="0-15", rss_import=rss_import, rss_peak=peak_rss_mib())],
           timed_s=end - timed, all_s=end - start)


def report(args, ranks, timed_s, all_s):
    what = (f"1 process, {args.micro_batches} micro-batch(es) accumulated" if args.stages == 1 else
            f"{args.stages} stages, {args.schedule}, M={args.micro_batches}")
    print(f"torch {torch.__version__} {what}, {args.threads} thread(s) per rank, batch {args.batch}, "
          f"{args.optimizer} lr {args.lr}")
    print(f"RESULT samples/s {args.steps * args.batch / timed_s:.1f} (timed {args.steps} steps after "
          f"{args.warmup} warm-up); all steps {(args.steps + args.warmup) * args.batch / all_s:.1f}")
    for r in ranks:
        print(f"RANK {r['rank']} layers {r['layers']} peak-RSS-MiB {r['rss_peak']:.0f} "
              f"(after import {r['rss_import']:.0f})")


def stage_worker(rank, args, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    set_threads(args.threads)
    rss_import = peak_rss_mib()
    dist.init_process_group("gloo", rank=rank, world_size=args.stages)
    import torch.distributed.pipelining as pipelining

    total = model_stages(args)
    mine = stages_of_rank(rank, args)
    bounds = stage_bounds(args.split, total)
    torch.manual_seed(1 + rank)
    modules = [wide_mlp_layers(*bounds[k]) for k in mine]
    stages = [pipelining.PipelineStage(m, k, total, torch.device("cpu")) for m, k in zip(modules, mine)]
    loss_fn = nn.CrossEntropyLoss()
    kind = getattr(pipelining, SCHEDULES[args.schedule][0])
    refused = None
    try:
        schedule = kind(stages if len(stages) > 1 else stages[0], n_microbatches=args.micro_batches,
                        loss_fn=loss_fn)
    except Exception as error:  # PyTorch's 1F1B refuses M < stages, interleaving M not a multiple of them
        refused = f"{type(error).__name__}: {error}"
    if refused is not None:
        if rank == 0:
            print(f"torch {torch.__version__} {args.stages} stages, {args.schedule}, M={args.micro_batches}: "
                  f"REFUSED {refused}")
        dist.destroy_process_group()
        return
    module = nn.ModuleList(modules)
    optimizer = make_optimizer(args, module.parameters())
    x, y = batch(args)
    first_stage, last_stage = 0 in mine, total - 1 in mine
    inputs = (x,) if first_stage else ()
    targets = dict(target=y, losses=[]) if last_stage else {}

    def step():
        optimizer.zero_grad(set_to_none=True)
        schedule.step(*inputs, **targets)
        optimizer.step()

    start, timed, end = timed_steps(step, args.warmup, args.steps, dist.barrier)
    layers = ",".join(f"{bounds[k][0]}-{bounds[k][1] - 1}" for k in mine)
    own = dict(rank=rank, layers=layers, rss_import=rss_import, rss_peak=peak_rss_mib())
    everyone = [None] * args.stages
    dist.all_gather_object(everyone, own)
    if rank == 0:
        report(args, everyone, timed_s=end - timed, all_s=end - start)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn_ranks(worker, args):
    """Starts args.ranks processes of worker(rank, args, port) over gloo on
    127.0.0.1, each with args.threads intra-op threads."""
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = str(args.threads)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    mp.spawn(worker, args=(args, free_port()), nprocs=args.ranks, join=True)


def join_group(rank, args, port):
    """This rank in the gloo group that spawn_ranks started."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    set_threads(args.threads)
    dist.init_process_group("gloo", rank=rank, world_size=args.ranks)


def train_and_report(rank, args, model, optimizer, x, y, title):
    """args.warmup then args.steps steps on (x, y), then rank 0 prints
    `title`, samples/s over the timed steps and over every step, and every
    rank's peak RSS; leaves the group."""
    loss_fn = nn.CrossEntropyLoss()
    rss_setup = peak_rss_mib()

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        optimizer.step()

    start, timed, end = timed_steps(step, args.warmup, args.steps, dist.barrier)
    mine = dict(rank=rank, rss_setup=rss_setup, rss_peak=peak_rss_mib())
    everyone = [None] * args.ranks
    dist.all_gather_object(everyone, mine)
    if rank == 0:
        print(title)
        print(f"RESULT samples/s {args.steps * args.batch / (end - timed):.1f} (timed {args.steps} steps after "
              f"{args.warmup} warm-up); all steps {(args.steps + args.warmup) * args.batch / (end - start):.1f}")
        for r in everyone:
            print(f"RANK {r['rank']} peak-RSS-MiB {r['rss_peak']:.0f} (after set-up {r['rss_setup']:.0f})")
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stages", type=int, default=2)
    parser.add_argument("--micro-batches", type=int, default=0,
                        help="default: 1 for one process, 2 x stages for a pipeline (as ddl-train)")
    parser.add_argument("--schedule", choices=list(SCHEDULES), default="1f1b")
    parser.add_argument("--split", default="",
                        help="the first layer of each model stage after the first, in ddl's numbering "
                             "(ddl-train --split); default: ddl's --balance parameters cut (8 for 2 stages, "
                             "4,8,12 for 4; the two-stage-per-rank schedules cut 2 x --stages)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--optimizer", choices=["sgd", "adadelta"], default="sgd")
    parser.add_argument("--lr", type=float, default=0.01)
    args = parser.parse_args()
    if args.micro_batches <= 0:
        args.micro_batches = 1 if args.stages == 1 else 2 * args.stages
    defaults = {2: "8", 4: "4,8,12"}
    args.split = [int(s) for s in (args.split or defaults.get(model_stages(args), "")).split(",") if s]
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = str(args.threads)
    if args.stages == 1:
        single_process(args)
    else:
        stage_bounds(args.split, model_stages(args))
        mp.spawn(stage_worker, args=(args, free_port()), nprocs=args.stages, join=True)


if __name__ == "__main__":
    main()
