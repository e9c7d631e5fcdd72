#!/usr/bin/env python3
"""PyTorch peer for bench/gpu_step.cpp: resnet_small's training step on a
GPU (forward, cross-entropy, backward, SGD with momentum 0.9) at batch 512:
step time, samples/s and peak tensor memory (torch.cuda.max_memory_allocated,
what ddl's memory_stats peak counts).

PyTorch's own GPU tuning guide is followed: cudnn.benchmark picks the
fastest convolution algorithms for the fixed shapes (--deterministic asks
for deterministic ones instead, ddl's default), and the SGD update is
PyTorch's default multi-tensor (foreach) one. cuDNN may use TF32 for float32
convolutions (PyTorch's default, torch.backends.cudnn.allow_tf32); --no-tf32
turns that off.

Beside the step it prints the host's time to enqueue the steps before the
final wait, as bench/gpu_step.cpp does; --profile runs the steps once more
under torch.profiler and prints its table of the GPU's kernels (the
counterpart of gpu_step's --kernels).

  python3 bench/torch_gpu_step.py [--batch 512] [--steps 20] [--repeats 5] [--profile]
"""
import argparse
import statistics
import time

import torch
import torch.nn as nn


class BasicBlock(nn.Module):
    """conv 3x3 (stride) - BN - ReLU - conv 3x3 - BN, plus the shortcut (a
    1x1 convolution with the stride and BN where the shape changes), ReLU:
    ddl's layers::basic_block."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
            nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout))
        self.shortcut = (nn.Identity() if stride == 1 and cin == cout else
                         nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)))

    def forward(self, x):
        return torch.relu(self.body(x) + self.shortcut(x))


def resnet_small():
    """ddl's models::resnet_small: 77,754 parameters for 1x28x28 images."""
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
        BasicBlock(16, 16, 1), BasicBlock(16, 32, 2), BasicBlock(32, 64, 2),
        nn.AvgPool2d(7), nn.Flatten(), nn.Linear(64, 10))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--steps", type=int, default=20, help="steps per timed repetition")
    parser.add_argument("--repeats", type=int, default=5, help="timed repetitions (median reported)")
    parser.add_argument("--deterministic", action="store_true",
                        help="deterministic cuDNN algorithms (ddl's default) instead of cudnn.benchmark")
    parser.add_argument("--no-tf32", action="store_true", help="no TF32 in cuDNN's float32 convolutions")
    parser.add_argument("--profile", action="store_true",
                        help="then the steps once more under torch.profiler: what the GPU ran, by kernel")
    args = parser.parse_args()
    torch.backends.cudnn.benchmark = not args.deterministic
    torch.backends.cudnn.deterministic = args.deterministic
    torch.backends.cudnn.allow_tf32 = not args.no_tf32
    device = torch.device("cuda")
    torch.manual_seed(11)
    model = resnet_small().to(device)
    assert sum(p.numel() for p in model.parameters()) == 77754
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    inputs = torch.rand(args.batch, 1, 28, 28, device=device)
    targets = (torch.arange(args.batch, device=device) * 7) % 10
    loss_fn = nn.CrossEntropyLoss()

    def run():
        """The steps' loss, and the host's seconds to enqueue them."""
        start = time.perf_counter()
        for _ in range(args.steps):
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(inputs), targets)
            loss.backward()
            optimizer.step()
        enqueued = time.perf_counter() - start
        return loss.item(), enqueued  # item() waits for the GPU

    last_loss, _ = run()  # warm-up: cudnn.benchmark's search, the caching allocator
    torch.cuda.reset_peak_memory_stats()
    times, enqueue_times = [], []
    for _ in range(args.repeats):
        start = time.perf_counter()
        last_loss, enqueued = run()
        times.append((time.perf_counter() - start) / args.steps)
        enqueue_times.append(enqueued / args.steps)
    step_ms = 1e3 * statistics.median(times)
    enqueue_ms = 1e3 * statistics.median(enqueue_times)
    print(f"model resnet_small, batch {args.batch}, torch {torch.__version__} on {torch.cuda.get_device_name()}")
    print(f"training step: {step_ms:.3f} ms (best {1e3 * min(times):.3f}), {args.batch / step_ms * 1e3:.0f} samples/s, "
          f"peak memory {torch.cuda.max_memory_allocated() / 2**20:.1f} MiB, last loss {last_loss:.4f}")
    print(f"host: {enqueue_ms:.3f} ms a step to enqueue it ({100 * enqueue_ms / step_ms:.0f}% of the step)")
    if args.profile:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as profiler:
            run()
        averages = profiler.key_averages()
        # PyTorch 2.4 renamed the CUDA columns to "device".
        sort_by = "self_device_time_total" if hasattr(averages[0], "self_device_time_total") else "self_cuda_time_total"
        print(f"GPU activity (torch.profiler) over {args.steps} steps:")
        print(averages.table(sort_by=sort_by, row_limit=25, max_name_column_width=110))


if __name__ == "__main__":
    main()
