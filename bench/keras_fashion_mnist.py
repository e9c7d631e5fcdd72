#!/usr/bin/env python3
"""Keras 3 peer of `ddl-train --model mnist_cnn`: the Keras MNIST CNN trained
on Fashion-MNIST with the same recipe (Glorot-uniform weights and zero
biases, Keras's defaults; Adadelta lr 1.0 rho 0.95 eps 1e-7; batch 128; a
fresh shuffle every epoch), printing per epoch the training time, samples/s
and test accuracy, and the cumulative training time (evaluation excluded) to
a target accuracy: the columns of bench/torch_fashion_mnist.py.

Run it from the peers' virtual environment (bench/install-peers.sh):
  bench/.venv-peers/bin/python3 bench/keras_fashion_mnist.py --threads 2
TensorFlow backend (tensorflow-cpu, oneDNN), channels_last, XLA off (slower
on the CPU here: bench/keras_cnn_step.py --jit-compile), intra-op threads as
given and one inter-op thread. Each epoch is one model.fit(epochs=1) call.
"""
import argparse
import gzip
import os
import struct
import time

from fashion_mnist_peer import EpochTable, add_recipe_options


def read_idx(path, np):
    with gzip.open(path, "rb") as f:
        data = f.read()
    _, _, kind, rank = struct.unpack(">BBBB", data[:4])
    dims = struct.unpack(">" + "I" * rank, data[4:4 + 4 * rank])
    assert kind == 0x08, f"{path}: not unsigned bytes"
    return np.frombuffer(data[4 + 4 * rank:], dtype=np.uint8).reshape(dims)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_recipe_options(parser)
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ["KERAS_BACKEND"] = "tensorflow"
    import numpy as np
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import keras

    from keras_cnn_step import keras_mnist_cnn, keras_resnet_small

    def load(split):
        images = read_idx(f"{args.data}/{split}-images-idx3-ubyte.gz", np).astype(np.float32) / 255.0
        labels = read_idx(f"{args.data}/{split}-labels-idx1-ubyte.gz", np).astype(np.int64)
        return images[..., np.newaxis], labels

    train_x, train_y = load("train")
    test_x, test_y = load("t10k")
    keras.utils.set_random_seed(args.seed)
    if args.bf16:
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    model = keras_resnet_small() if args.model == "resnet_small" else keras_mnist_cnn()
    model.compile(optimizer=keras.optimizers.Adadelta(learning_rate=1.0, rho=0.95, epsilon=1e-7),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"],
                  jit_compile=False)
    print(f"keras {keras.__version__} tensorflow {tf.__version__}, {args.model} "
          f"({sum(int(np.prod(w.shape)) for w in model.trainable_weights)} trainable parameters), "
          f"threads {args.threads}, batch {args.batch_size}, "
          f"policy {keras.mixed_precision.global_policy().name}, "
          f"{len(train_y)} training and {len(test_y)} test images")
    table = EpochTable(len(train_y), args.target)
    for epoch in range(1, args.epochs + 1):
        start = time.perf_counter()
        history = model.fit(train_x, train_y, batch_size=args.batch_size, epochs=1, shuffle=True, verbose=0)
        seconds = time.perf_counter() - start
        _, accuracy = model.evaluate(test_x, test_y, batch_size=500, verbose=0)
        table.add(epoch, seconds, history.history["loss"][0], accuracy)
    table.finish()


if __name__ == "__main__":
    main()
