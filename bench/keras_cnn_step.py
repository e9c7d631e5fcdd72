#!/usr/bin/env python3
"""Keras 3 (TensorFlow backend, tensorflow-cpu with oneDNN) peer for
bench/layers: the Keras MNIST CNN's training step at batch 128 on the CPU,
with explicit intra- and inter-op thread counts.

Run it from the peers' virtual environment (bench/install-peers.sh):
  bench/.venv-peers/bin/python3 bench/keras_cnn_step.py --threads 2
Prints the median step over --repeats timed steps after warm-up, as
ddl_bench_layers does. The model is Keras's own example, channels_last
(NHWC, Keras's default and TensorFlow's fast CPU layout); the step is the
compiled train function that fit() runs (model.train_on_batch), SGD lr 0.01.
"""
import argparse
import os
import statistics
import sys
import time


def keras_mnist_cnn():
    """The Keras MNIST CNN as Keras's example writes it (NHWC). Imports keras
    when called, after the caller has set TensorFlow's thread counts. Under
    the mixed_bfloat16 policy the logits come out float32, as Keras's mixed
    precision guide does for a numerically stable loss."""
    import keras
    from keras import layers
    return keras.Sequential([
        keras.Input(shape=(28, 28, 1)),
        layers.Conv2D(32, 3, activation="relu"),
        layers.Conv2D(64, 3, activation="relu"),
        layers.MaxPooling2D(2),
        layers.Dropout(0.25),
        layers.Flatten(),
        layers.Dense(128, activation="relu"),
        layers.Dropout(0.5),
        layers.Dense(10, dtype="float32"),
    ])


def keras_resnet_small():
    """ddl's models::resnet_small in Keras (NHWC): conv-BN-ReLU, three basic
    blocks (16, 32 and 64 channels; the last two halve the image, their
    shortcut a strided 1x1 convolution with BN), a 7x7 average pool and a
    Dense layer: 77,754 trainable parameters, as ddl's and torch's. BN's
    momentum and epsilon are PyTorch's (ddl's defaults)."""
    import keras
    from keras import layers

    def bn():
        return layers.BatchNormalization(momentum=0.9, epsilon=1e-5)

    def conv3x3(x, channels, stride):
        # Padding 1 on every side, as ddl and torch pad: Keras's "same"
        # pads a stride-2 convolution at the bottom and right only.
        return layers.Conv2D(channels, 3, stride, use_bias=False)(layers.ZeroPadding2D(1)(x))

    def block(x, channels, stride):
        body = conv3x3(x, channels, stride)
        body = layers.ReLU()(bn()(body))
        body = bn()(conv3x3(body, channels, 1))
        shortcut = x
        if stride != 1 or x.shape[-1] != channels:
            shortcut = bn()(layers.Conv2D(channels, 1, stride, use_bias=False)(x))
        return layers.ReLU()(layers.Add()([body, shortcut]))

    inputs = keras.Input(shape=(28, 28, 1))
    x = layers.ReLU()(bn()(conv3x3(inputs, 16, 1)))
    for channels, stride in ((16, 1), (32, 2), (64, 2)):
        x = block(x, channels, stride)
    x = layers.Flatten()(layers.AveragePooling2D(7)(x))
    return keras.Model(inputs, layers.Dense(10, dtype="float32")(x))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2, help="intra-op threads")
    parser.add_argument("--inter-op-threads", type=int, default=1)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--mixed-bfloat16", action="store_true",
                        help="Keras's mixed_bfloat16 policy: bf16 compute, float32 variables")
    parser.add_argument("--jit-compile", choices=["auto", "on", "off"], default="off",
                        help="XLA: off measured fastest on the CPU here (docs/PERFORMANCE.md)")
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ["KERAS_BACKEND"] = "tensorflow"
    import numpy as np
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.inter_op_threads)
    import keras

    keras.utils.set_random_seed(1)
    if args.mixed_bfloat16:
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    model = keras_mnist_cnn()
    jit = {"auto": "auto", "on": True, "off": False}[args.jit_compile]
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=jit)
    rng = np.random.default_rng(1)
    x = rng.random((args.batch, 28, 28, 1), dtype=np.float32)
    y = rng.integers(0, 10, args.batch)
    for _ in range(3):  # warm-up: tracing, oneDNN primitive creation
        model.train_on_batch(x, y)
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        model.train_on_batch(x, y)
        times.append(time.perf_counter() - start)
    ms = 1e3 * statistics.median(times)
    print(f"keras {keras.__version__} tensorflow {tf.__version__}, threads {args.threads} "
          f"(inter-op {args.inter_op_threads}), jit_compile {args.jit_compile}, batch {args.batch}, "
          f"policy {keras.mixed_precision.global_policy().name}", file=sys.stderr)
    print(f"training step {ms:.2f} ms ({1e3 * args.batch / ms:.0f} samples/s)")


if __name__ == "__main__":
    main()
