#!/usr/bin/env python3
"""TF's "Parameter server training with ParameterServerStrategy" tutorial,
the custom training loop half, on actorps: ClusterCoordinator,
per-worker datasets and scheduled train_step closures, for the
Fashion-MNIST CNN of config/fashion_mnist.toml on 2 workers and 2 PS tasks.

Three ways to run it, as tutorial_fit.py (README.md next to this file):

  (a) no TF_CONFIG: starts a local cluster (2 worker and 2 PS processes) and trains on it
  (b) TF_CONFIG's task is a worker or ps: serves that node until the chief ends the job
  (c) TF_CONFIG's task is the chief: trains on the cluster, then ends the job

Prints each epoch's loss and accuracy (from the closures' results) and
"test accuracy NN.NN%" at the end.
"""

import argparse
import contextlib
import json
import math
import os
import sys
import tempfile
import time

import actorps
import actorps.layers as layers

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--steps-per-epoch", type=int, default=938, help="60,000 examples / batch 64 (default 938)")
    p.add_argument("--steps-per-closure", type=int, default=10, help="train steps per scheduled closure")
    p.add_argument("--learning-rate", type=float, default=0.002)
    p.add_argument("--workdir", default=None, help="where the final weights are exported as ONNX "
                   "(default: a temporary directory)")
    p.add_argument("--data", default=os.path.join(ROOT, "data", "fashion"),
                   help="Fashion-MNIST's IDX files (the workers' path; bash tools/fetch_data.sh)")
    return p.parse_args(argv)


def task_type():
    """TF_CONFIG's task type, or None without TF_CONFIG."""
    text = os.environ.get("TF_CONFIG", "").strip()
    if not text:
        return None
    return (json.loads(text).get("task") or {}).get("type", "chief")


def make_dataset_fn(data):
    def dataset_fn(input_context=None):
        """Each worker's training data (the coordinator adds the shard op: each worker reads its own half)."""
        return (actorps.Dataset.from_idx(os.path.join(data, "train-images-idx3-ubyte"),
                                         os.path.join(data, "train-labels-idx1-ubyte"))
                .map("scale", factor=1 / 255)
                .shuffle(30000, seed=1)
                .repeat()
                .batch(64))
    return dataset_fn


def test_dataset(data):
    return (actorps.Dataset.from_idx(os.path.join(data, "t10k-images-idx3-ubyte"),
                                     os.path.join(data, "t10k-labels-idx1-ubyte"))
            .map("scale", factor=1 / 255)
            .batch(500))


def build_model():
    """Conv2D(32, 3, relu) -> MaxPooling2D(2) -> Flatten -> Dense(64, relu) -> Dense(10)."""
    inputs = layers.Input(shape=(28, 28, 1))
    x = layers.Conv2D(32, 3, activation="relu")(inputs)
    x = layers.MaxPooling2D(2)(x)
    x = layers.Flatten()(x)
    x = layers.Dense(64, activation="relu")(x)
    logits = layers.Dense(10)(x)
    return actorps.Model(inputs=inputs, outputs=logits, loss="sparse_categorical_crossentropy")


def train(resolver, args, workdir):
    strategy = actorps.ParameterServerStrategy(
        resolver,
        variable_partitioner=actorps.partitioners.MinSizePartitioner(min_shard_bytes=256 << 10, max_shards=2),
        threads_per_worker=1, pull_ahead=True, runtime={"threads": 1})
    with strategy.scope():
        model = build_model()
        # The PS shards apply the optimizer (a custom loop has no per-epoch learning-rate decay: fit's).
        model.compile(optimizer=actorps.optimizers.Adam(learning_rate=args.learning_rate))
    coordinator = actorps.ClusterCoordinator(strategy)
    try:
        # The model's variables go onto the PS tasks here, and each worker creates its dataset.
        per_worker_dataset = coordinator.create_per_worker_dataset(make_dataset_fn(args.data))
        per_worker_iterator = iter(per_worker_dataset)
        # An epoch's steps in closures of steps_per_closure (the last one the rest).
        full, rest = divmod(args.steps_per_epoch, args.steps_per_closure)
        closures = [args.steps_per_closure] * full + ([rest] if rest else [])
        history = []
        for epoch in range(args.epochs):
            start = time.monotonic()
            results = [coordinator.schedule("train_step", args=(per_worker_iterator, steps)) for steps in closures]
            coordinator.join()
            fetched = coordinator.fetch(results)  # each: [loss_sum, correct, examples, steps]
            steps = sum(r[3] for r in fetched)
            examples = sum(r[2] for r in fetched)
            loss = sum(r[0] for r in fetched) / steps  # (loss_sum: the sum of each step's mean batch loss)
            accuracy = sum(r[1] for r in fetched) / examples
            history.append(loss)
            print(f"epoch {epoch + 1}/{args.epochs}: {steps} steps in {time.monotonic() - start:.1f} s, "
                  f"loss {loss:.4f}, accuracy {100 * accuracy:.2f}%", flush=True)
            if not math.isfinite(loss):
                raise RuntimeError(f"the loss diverged at epoch {epoch + 1}")
        result = model.evaluate(test_dataset(args.data), return_dict=True)  # in parts on the workers, the current variables
        model.export(os.path.join(workdir, "model.onnx"))
        print(f"test loss {result['loss']:.4f}")
        print(f"test accuracy {100 * result['accuracy']:.2f}%", flush=True)
    finally:
        if strategy._session is not None:
            strategy.end_job()  # the chief ends the job: every worker and PS node exits 0
    return 0


def main(argv=None):
    args = parse_args(argv)
    kind = task_type()
    if kind in ("worker", "ps"):  # (b): serve this task's node until the chief ends the job
        server = actorps.Server(actorps.cluster_resolver.TFConfigClusterResolver(), runtime={"threads": 1})
        return server.join()
    with contextlib.ExitStack() as stack:
        workdir = args.workdir or stack.enter_context(tempfile.TemporaryDirectory(prefix="tutorial-loop-"))
        os.makedirs(workdir, exist_ok=True)
        if kind is None:  # (a): a cluster of this machine, this process its chief
            resolver = stack.enter_context(actorps.testing.local_cluster(num_workers=2, num_ps=2))
        else:  # (c): the chief of TF_CONFIG's cluster
            resolver = actorps.cluster_resolver.TFConfigClusterResolver()
        return train(resolver, args, workdir)


if __name__ == "__main__":
    sys.exit(main())
