"""`actorps bench python`'s measurements (apps/bench_python.cpp runs it
and prints the table): the main job's model and data trained by
`model.fit` from Python and by `actorps train` on the same job text,
alternating, each on a fresh local cluster (2 workers, 2 PS); and
`ClusterCoordinator.schedule` of no-op closures from Python, scheduled and
joined. Prints one JSON object: samples/s per repetition of each path,
closures/s per repetition."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import actorps

BATCH = 64


def main_job(resolver, root):
    """The main job's (config/fashion_mnist.toml) model, optimizer and training data, built in Python."""
    strategy = actorps.ParameterServerStrategy(resolver, threads_per_worker=1, pull_ahead=True, runtime={"threads": 1})
    with strategy.scope():
        model = actorps.Model.from_toml(os.path.join(root, "config/fashion_mnist.toml"))
    model.compile(optimizer=actorps.optimizers.Adam(learning_rate=0.002), steps_per_execution=1)
    fashion = os.path.join(root, "data/fashion")
    train = (actorps.data.Dataset.from_idx(f"{fashion}/train-images-idx3-ubyte", f"{fashion}/train-labels-idx1-ubyte")
             .map("scale", factor=1 / 255).shuffle(30000, seed=1).repeat().batch(BATCH))
    return strategy, model, train


def python_rate(root, steps):
    with actorps.testing.local_cluster(num_workers=2, num_ps=2) as resolver:
        _, model, train = main_job(resolver, root)
        history = model.fit(train, epochs=1, steps_per_epoch=steps, verbose=0)
        epoch = history.timing[-1]
        return epoch["step"] * BATCH / epoch["seconds"]


def cli_rate(root, steps, scratch):
    with actorps.testing.local_cluster(num_workers=2, num_ps=2) as resolver:
        strategy, model, train = main_job(resolver, root)
        training = dict(model._training(), epochs=1, steps_per_epoch=steps)
        job = os.path.join(scratch, "job.toml")
        with open(job, "w") as f:
            f.write(strategy._job_text(model, train, None, training))
        report = os.path.join(scratch, "report.json")
        env = dict(os.environ, TF_CONFIG=resolver._tf_config())
        subprocess.run([actorps.ACTORPS_BIN, "train", job, "--report", report], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        with open(report) as f:
            epoch = json.load(f)["history"][-1]
        return epoch["step"] * BATCH / epoch["seconds"]


def schedule_rate(root, closures):
    with actorps.testing.local_cluster(num_workers=2, num_ps=1) as resolver:
        strategy, model, train = main_job(resolver, root)  # (the model stays alive: the strategy holds it weakly)
        coordinator = actorps.ClusterCoordinator(strategy)
        coordinator.create_per_worker_dataset(train)
        rates = []
        for _ in range(3):
            start = time.perf_counter()
            for _ in range(closures):
                coordinator.schedule("noop")
            coordinator.join()
            rates.append(closures / (time.perf_counter() - start))
        del model
        return rates


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--root", required=True, help="the source tree (config/, data/)")
    p.add_argument("--steps", type=int, default=600, help="training steps per repetition")
    p.add_argument("--repetitions", type=int, default=3)
    p.add_argument("--closures", type=int, default=100000)
    a = p.parse_args()
    out = {"python": [], "cli": [], "schedule": []}
    with tempfile.TemporaryDirectory(prefix="actorps-bench-python-") as scratch:
        for _ in range(a.repetitions):  # alternating, so that drift on the machine hits both
            out["python"].append(python_rate(a.root, a.steps))
            out["cli"].append(cli_rate(a.root, a.steps, scratch))
    out["schedule"] = schedule_rate(a.root, a.closures)
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
