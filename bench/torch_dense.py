#!/usr/bin/env python3
"""PyTorch peer for bench/dense.cpp: the Dense layers' products of wide_mlp
and mnist_cnn (batch 128, no bias), forward and forward + backward (no
input gradient for wide_mlp's first layer), with an explicit thread count;
the same output as ddl_bench_dense.

torch.nn.functional.linear with the weight in PyTorch's own [out, in]
layout (its best: the forward is x·Wᵀ on MKL), from the peers' virtual
environment (bench/install-peers.sh):
    bench/.venv-peers/bin/python3 bench/torch_dense.py --threads 1,2
Times are medians of --repeats runs after a warm-up.
"""
import argparse

import torch

from torch_cnn_step import median_ms  # the same warm-up and median

LAYERS = [(784, 4096, False), (4096, 4096, True), (4096, 10, True), (9216, 128, True), (128, 10, True)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_interop_threads(1)
    torch.manual_seed(5)
    print(f"torch {torch.__version__} CPU dense products, batch {args.batch}; ms = median of {args.repeats} runs")
    print(f"{'layer':<16} {'pass':<8} {'threads':>7} {'ms':>9} {'GFLOP/s':>9}")
    for threads in (int(t) for t in args.threads.split(",")):
        torch.set_num_threads(threads)
        for fan_in, fan_out, input_needs_grad in LAYERS:
            w = (torch.rand(fan_out, fan_in) * 0.1 - 0.05).requires_grad_()
            x = (torch.rand(args.batch, fan_in) * 2 - 1).requires_grad_(input_needs_grad)
            g = torch.rand(args.batch, fan_out) * 2 - 1
            flops = 2.0 * args.batch * fan_in * fan_out

            def forward():
                with torch.no_grad():
                    torch.nn.functional.linear(x, w)

            def both():
                w.grad = None
                x.grad = None
                torch.nn.functional.linear(x, w).backward(g)

            for name, fn, pass_flops in (("forward", forward, flops), ("fwd+bwd", both, (3 if input_needs_grad else 2) * flops)):
                ms = median_ms(fn, args.repeats)
                print(f"{f'{fan_in}->{fan_out}':<16} {name:<8} {threads:>7} {ms:>9.3f} "
                      f"{pass_flops / (ms * 1e-3) * 1e-9:>9.1f}")


if __name__ == "__main__":
    main()
