#!/usr/bin/env python3
"""PyTorch peer of `ddl-train --model mnist_cnn`: the Keras MNIST CNN trained
on Fashion-MNIST with the same recipe (Glorot-uniform weights, zero biases,
Adadelta lr 1.0 rho 0.95 eps 1e-7, batch 128, a fresh shuffle every epoch),
printing per epoch the training time, samples/s and test accuracy, and the
cumulative training time (evaluation excluded) to a target accuracy.

Run it this way, or the comparison is unfair to PyTorch:
  PyTorch 2.x from the peers' virtual environment, NHWC, glibc's malloc
  keeping freed memory (bench/torch_cnn_step.py says why):
    GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967296 \
        bench/.venv-peers/bin/python3 bench/torch_fashion_mnist.py --threads 2 --channels-last
  Debian's PyTorch 1.13, OpenBLAS first:
    LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread \
        python3 bench/torch_fashion_mnist.py --threads 2
"""
import argparse
import gzip
import struct
import time

import torch
import torch.nn as nn

from fashion_mnist_peer import EpochTable, add_recipe_options
from torch_cnn_step import keras_mnist_cnn
from torch_gpu_step import resnet_small


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    _, _, kind, rank = struct.unpack(">BBBB", data[:4])
    dims = struct.unpack(">" + "I" * rank, data[4:4 + 4 * rank])
    assert kind == 0x08, f"{path}: not unsigned bytes"
    return torch.frombuffer(bytearray(data[4 + 4 * rank:]), dtype=torch.uint8).reshape(dims)


def load(directory, split):
    images = read_idx(f"{directory}/{split}-images-idx3-ubyte.gz").float().div_(255.0).unsqueeze(1)
    labels = read_idx(f"{directory}/{split}-labels-idx1-ubyte.gz").long()
    return images, labels


def glorot(model):
    for layer in model.modules():
        if isinstance(layer, (nn.Conv2d, nn.Linear)):
            nn.init.xavier_uniform_(layer.weight)
            if layer.bias is not None:
                nn.init.zeros_(layer.bias)


def evaluate(model, images, labels, batch=500):
    model.eval()
    correct, loss = 0, 0.0
    with torch.no_grad():
        for start in range(0, len(labels), batch):
            logits = model(images[start:start + batch])
            target = labels[start:start + batch]
            loss += nn.functional.cross_entropy(logits, target, reduction="sum").item()
            correct += (logits.argmax(1) == target).sum().item()
    model.train()
    return correct / len(labels), loss / len(labels)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_recipe_options(parser)
    parser.add_argument("--device", default="cpu", help="cpu, or cuda: the peer of ddl-train --device cuda")
    parser.add_argument("--channels-last", action="store_true", help="NHWC activations and weights")
    args = parser.parse_args()
    device = torch.device(args.device)
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(args.seed)

    train_x, train_y = (t.to(device) for t in load(args.data, "train"))
    test_x, test_y = (t.to(device) for t in load(args.data, "t10k"))
    model = resnet_small() if args.model == "resnet_small" else keras_mnist_cnn()
    glorot(model)
    model.to(device)
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
        train_x = train_x.contiguous(memory_format=torch.channels_last)
        test_x = test_x.contiguous(memory_format=torch.channels_last)
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0, rho=0.95, eps=1e-7)
    loss_fn = nn.CrossEntropyLoss()
    parameters = sum(p.numel() for p in model.parameters())
    print(f"pytorch {torch.__version__} on {device}, {args.model} ({parameters} trainable parameters), "
          f"threads {torch.get_num_threads()}, batch {args.batch_size}, "
          f"{len(train_y)} training and {len(test_y)} test images")
    table = EpochTable(len(train_y), args.target)
    for epoch in range(1, args.epochs + 1):
        order = torch.randperm(len(train_y), device=device)
        start, total_loss = time.perf_counter(), 0.0
        for first in range(0, len(order), args.batch_size):
            index = order[first:first + args.batch_size]
            optimizer.zero_grad()
            with torch.autocast(args.device.split(":")[0], dtype=torch.bfloat16, enabled=args.bf16):
                loss = loss_fn(model(train_x[index]), train_y[index])
            loss.backward()
            optimizer.step()
            total_loss += loss.item() * len(index)
        seconds = time.perf_counter() - start
        accuracy, _ = evaluate(model, test_x, test_y)
        table.add(epoch, seconds, total_loss / len(train_y), accuracy)
    table.finish()


if __name__ == "__main__":
    main()
