#!/usr/bin/env python3
"""PyTorch peer for bench/layers: the Keras MNIST CNN's training step at
batch 128 on the CPU, per layer and whole, with an explicit thread count.

Run it this way, or the comparison is unfair to PyTorch:
  PyTorch 2.x from the peers' virtual environment (bench/install-peers.sh),
  with glibc's malloc keeping its freed memory (PyTorch's CPU tuning guide
  recommends tcmalloc or jemalloc for the same reason: page faults):
    GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967296 \
        bench/.venv-peers/bin/python3 bench/torch_cnn_step.py --threads 2 --channels-last
  Debian's PyTorch 1.13 (the extra column), with OpenBLAS put first (it uses
  the reference BLAS otherwise):
    LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread \
        /usr/bin/python3 bench/torch_cnn_step.py --threads 2
Times are medians of --repeats runs after a warm-up, as ddl_bench_layers
reports.
"""
import argparse
import statistics
import time

import torch
import torch.nn as nn


def keras_mnist_cnn():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3), nn.ReLU(),
        nn.Conv2d(32, 64, 3), nn.ReLU(),
        nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(),
        nn.Linear(9216, 128), nn.ReLU(), nn.Dropout(0.5),
        nn.Linear(128, 10))


def median_ms(fn, repeats):
    for _ in range(3):  # warm-up: allocations, oneDNN primitive creation
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--channels-last", action="store_true",
                        help="NHWC activations and weights (PyTorch's CPU tuning guide: oneDNN's fast layout)")
    parser.add_argument("--autocast-bf16", action="store_true",
                        help="forward and loss under torch.autocast('cpu', torch.bfloat16): bf16 matrix products")
    parser.add_argument("--step-only", action="store_true", help="skip the per-layer timings")
    parser.add_argument("--profile", action="store_true",
                        help="after timing, print torch.profiler's table of the step's operators (self CPU time)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(1)

    model = keras_mnist_cnn()
    x = torch.randn(args.batch, 1, 28, 28)
    y = torch.randint(0, 10, (args.batch,))
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    layers = {
        "conv 1->32 28x28": (nn.Conv2d(1, 32, 3), torch.randn(args.batch, 1, 28, 28)),
        "conv 32->64 26x26": (nn.Conv2d(32, 64, 3), torch.randn(args.batch, 32, 26, 26)),
        "maxpool 2 24x24": (nn.MaxPool2d(2), torch.randn(args.batch, 64, 24, 24)),
        "dense 9216->128": (nn.Linear(9216, 128), torch.randn(args.batch, 9216)),
    }
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
        x = x.to(memory_format=torch.channels_last)
    if args.step_only:
        layers = {}
    print(f"pytorch {torch.__version__}, threads {torch.get_num_threads()}, batch {args.batch}, "
          f"channels_last {args.channels_last}, autocast bf16 {args.autocast_bf16}")
    print(f"{'layer':<22}{'forward ms':>12}{'fwd+bwd ms':>12}")
    for name, (layer, inp) in layers.items():
        inp.requires_grad_(True)

        def forward():
            with torch.no_grad():
                layer(inp)

        def forward_backward():
            layer(inp).sum().backward()

        print(f"{name:<22}{median_ms(forward, args.repeats):>12.2f}{median_ms(forward_backward, args.repeats):>12.2f}")

    def step():
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.autocast_bf16):
            loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()

    ms = median_ms(step, args.repeats)
    print(f"{'training step':<22}{'':>12}{ms:>12.2f}   ({1e3 * args.batch / ms:.0f} samples/s)")
    if args.profile:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(args.repeats):
                step()
        print(f"per step, {args.repeats} steps profiled:")
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))


if __name__ == "__main__":
    main()
