#!/usr/bin/env python3
"""PyTorch peer for bench/layers: the Keras MNIST CNN's training step at
batch 128 on the CPU, per layer and whole, with an explicit thread count.

Run it as DESIGN.md requires, or the comparison is unfair to PyTorch:
  LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread \
      python3 bench/torch_cnn_step.py --threads 2
(Debian's python3-torch uses the reference BLAS unless OpenBLAS is put
first, and runs one thread unless told otherwise.)
"""
import argparse
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


def best_ms(fn, repeats):
    fn()  # warm-up: allocations, oneDNN primitive creation
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * min(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
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
    print(f"pytorch {torch.__version__}, threads {torch.get_num_threads()}, batch {args.batch}")
    print(f"{'layer':<22}{'forward ms':>12}{'fwd+bwd ms':>12}")
    for name, (layer, inp) in layers.items():
        inp.requires_grad_(True)

        def forward():
            with torch.no_grad():
                layer(inp)

        def forward_backward():
            layer(inp).sum().backward()

        print(f"{name:<22}{best_ms(forward, args.repeats):>12.2f}{best_ms(forward_backward, args.repeats):>12.2f}")

    def step():
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()

    ms = best_ms(step, args.repeats)
    print(f"{'training step':<22}{'':>12}{ms:>12.2f}   ({1e3 * args.batch / ms:.0f} samples/s)")


if __name__ == "__main__":
    main()
