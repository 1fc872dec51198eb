#!/usr/bin/env python3
"""TF's "Parameter server training with ParameterServerStrategy" tutorial,
the Model.fit half, on actorps: the Fashion-MNIST CNN (config/fashion_mnist.toml's
job) trained by 2 workers against 2 PS tasks.

Three ways to run it (README.md next to this file):

  (a) no TF_CONFIG: starts a local cluster (2 worker and 2 PS processes) and trains on it
        python3 tutorial_fit.py --epochs 2 --steps-per-epoch 300
  (b) TF_CONFIG's task is a worker or ps: serves that node until the chief ends the job
        TF_CONFIG='{"cluster": {...}, "task": {"type": "worker", "index": 0}}' python3 tutorial_fit.py
  (c) TF_CONFIG's task is the chief: trains on the cluster, then ends the job (every node exits 0)
        TF_CONFIG='{"cluster": {...}, "task": {"type": "chief", "index": 0}}' python3 tutorial_fit.py

(b) + (c) is TF's recipe: the same program once per process, only TF_CONFIG differs.
Prints "test accuracy NN.NN%" at the end.
"""

import argparse
import contextlib
import functools
import json
import os
import sys
import tempfile

import actorps
import actorps.layers as layers

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--steps-per-epoch", type=int, default=938, help="60,000 examples / batch 64 (default 938)")
    p.add_argument("--steps-per-execution", type=int, default=1, help="steps per closure on a worker")
    p.add_argument("--workdir", default=None, help="backup (BackupAndRestore: a rerun resumes) and TensorBoard "
                   "logs (default: a temporary directory)")
    p.add_argument("--data", default=os.path.join(ROOT, "data", "fashion"),
                   help="Fashion-MNIST's IDX files (the workers' path; bash tools/fetch_data.sh)")
    return p.parse_args(argv)


def task_type():
    """TF_CONFIG's task type, or None without TF_CONFIG."""
    text = os.environ.get("TF_CONFIG", "").strip()
    if not text:
        return None
    return (json.loads(text).get("task") or {}).get("type", "chief")


def dataset_fn(data, input_context):
    """The training data of each worker, as TF's dataset_fn. The
    coordinator puts each worker's shard in front, so the shard below is
    TF's line kept as it was: a no-op here (InputContext says 1 pipeline)."""
    return (actorps.Dataset.from_idx(os.path.join(data, "train-images-idx3-ubyte"),
                                     os.path.join(data, "train-labels-idx1-ubyte"))
            .shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
            .map("scale", factor=1 / 255)
            .shuffle(30000, seed=1)  # a worker's whole shard: the IDX file is sorted by class
            .repeat()
            .batch(64))


def test_dataset(data):
    """The 10,000 test images, evaluated in parts on the workers."""
    return (actorps.Dataset.from_idx(os.path.join(data, "t10k-images-idx3-ubyte"),
                                     os.path.join(data, "t10k-labels-idx1-ubyte"))
            .map("scale", factor=1 / 255)
            .batch(500))


def build_model():
    """Conv2D(32, 3, relu) -> MaxPooling2D(2) -> Flatten -> Dense(64, relu) -> Dense(10), Keras's functional API."""
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
        threads_per_worker=1,  # 2 workers x 1 kernel thread: the processes share this machine's cores
        pull_ahead=True,  # the main job's: step s + 1's values pulled while s computes
        runtime={"threads": 1})
    with strategy.scope():
        model = build_model()
    model.compile(optimizer=actorps.optimizers.Adam(learning_rate=0.002, learning_rate_decay=0.7),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"],
                  steps_per_execution=args.steps_per_execution)
    callbacks = [
        actorps.callbacks.BackupAndRestore(os.path.join(workdir, "backup")),
        actorps.callbacks.TensorBoard(os.path.join(workdir, "logs")),
        actorps.callbacks.EarlyStopping(monitor="val_loss", patience=2),
    ]
    test = test_dataset(args.data)
    try:
        history = model.fit(actorps.data.DatasetCreator(functools.partial(dataset_fn, args.data)), epochs=args.epochs, steps_per_epoch=args.steps_per_epoch,
                            validation_data=test, callbacks=callbacks)
        print("history:", json.dumps({k: [round(v, 4) for v in vs] for k, vs in history.history.items()}))
        result = model.evaluate(test, return_dict=True)
        print(f"test loss {result['loss']:.4f}")
        print(f"test accuracy {100 * result['accuracy']:.2f}%", flush=True)
    finally:
        if strategy._session is not None:  # (connected: not when fit failed before it reached the cluster)
            strategy.end_job()  # the chief ends the job: every worker and PS node exits 0
    return 0


def main(argv=None):
    args = parse_args(argv)
    kind = task_type()
    if kind in ("worker", "ps"):  # (b): serve this task's node until the chief ends the job
        server = actorps.Server(actorps.cluster_resolver.TFConfigClusterResolver(), runtime={"threads": 1})
        return server.join()
    with contextlib.ExitStack() as stack:
        workdir = args.workdir or stack.enter_context(tempfile.TemporaryDirectory(prefix="tutorial-fit-"))
        if kind is None:  # (a): a cluster of this machine, this process its chief
            resolver = stack.enter_context(actorps.testing.local_cluster(num_workers=2, num_ps=2))
        else:  # (c): the chief of TF_CONFIG's cluster
            resolver = actorps.cluster_resolver.TFConfigClusterResolver()
        return train(resolver, args, workdir)


if __name__ == "__main__":
    sys.exit(main())
