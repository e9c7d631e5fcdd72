"""What the Fashion-MNIST peers share (bench/keras_fashion_mnist.py,
bench/torch_fashion_mnist.py, and ddl-train's log in
bench/compare_fashion_mnist.sh): the recipe's command-line options and the
per-epoch table (training time, samples/s, loss, test accuracy, cumulative
training time), ending with the time to the target accuracy, the line the
comparison reads. Plain Python, so every interpreter the comparison runs
(the peers' venv, Debian's) can import it.
"""


def add_recipe_options(parser):
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--target", type=float, default=0.91)
    parser.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--model", choices=["mnist_cnn", "resnet_small"], default="mnist_cnn",
                        help="the network: ddl's mnist_cnn (the Keras MNIST CNN) or resnet_small")
    parser.add_argument("--bf16", action="store_true",
                        help="bf16 mixed precision: Keras's mixed_bfloat16 policy, torch.autocast(bfloat16)")


class EpochTable:
    def __init__(self, samples, target):
        self.samples, self.target = samples, target
        self.cumulative, self.reached, self.epochs = 0.0, None, 0
        print(f"{'epoch':>5} {'train_s':>8} {'samples/s':>10} {'loss':>8} {'test_acc':>9} {'cum_train_s':>12}")

    def add(self, epoch, seconds, loss, accuracy):
        self.cumulative += seconds
        self.epochs = epoch
        if self.reached is None and accuracy >= self.target:
            self.reached = (epoch, self.cumulative)
        print(f"{epoch:>5} {seconds:>8.1f} {self.samples / seconds:>10.0f} {loss:>8.4f} {accuracy:>9.4f} "
              f"{self.cumulative:>12.1f}", flush=True)

    def finish(self):
        if self.reached:
            print(f"time to {100 * self.target:.1f}%: {self.reached[1]:.1f} s of training (epoch {self.reached[0]})")
        else:
            print(f"time to {100 * self.target:.1f}%: not reached in {self.epochs} epochs")
