#!/usr/bin/python3
"""PyTorch's single-process peer of an actorps job: the job's model, data,
optimizer and epochs, trained in one process, evaluated after each epoch.

    tools/torch_zoo.py config/zoo/dlrm.toml [--epochs N] [--threads 2] [--seed S]

prints `epoch E seconds S accuracy A loss L` per epoch (sigmoid_bce jobs add
`auc U log_loss L`, AUC exact with ties counted half, as actorps' evaluation)
and a `final ...` line. The model is the JSON actorps resolves from the job
(`actorps export JOB --format model-json`), built by torch_model.py's Graph
with actorps' initializers (Glorot-uniform kernels, zero biases, embeddings
uniform in +-0.05). The data: [dataset] and [eval_dataset] read as actorps'
readers do (IDX; CSV/TSV columns, FNV-1a 64 hashing or vocabularies,
shared_ids; map, filter and skip ops in order); shuffle is a seeded full
permutation per pass (not actorps' buffer), batches run across passes as
repeat-then-batch does. [training]: sgd, momentum, adam (eps 1e-7, as
actorps/TF; SparseAdam for embedding tables: lazy rows, as actorps' shard)
or adagrad (initial accumulator 0.1, eps 1e-7), learning_rate,
learning_rate_decay per epoch, epochs, steps_per_epoch (the job's steps of
all workers together: that many steps of the job's batch size per epoch;
without it, one pass). `--dump-rows N` prints [dataset]'s first N examples
after those ops (label, then features) and exits: tests compare them with
actorps' reader. Bad job input exits 2."""
import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
import tomllib

import numpy as np
import torch
import torch.nn as nn

from torch_model import Embedding, Graph, loss_function, read_idx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class JobError(Exception):
    """Bad job input: the message names the file and the key."""


def model_json(job, actorps):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "model.json")
        r = subprocess.run([actorps, "export", job, "--format", "model-json", "--out", out],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise JobError(f"{actorps} export {job} --format model-json: {r.stderr.strip() or r.stdout.strip()}")
        with open(out) as f:
            return json.load(f)


@functools.lru_cache(maxsize=None)
def fnv1a(text):
    """FNV-1a 64 of the bytes, as actors/dataset/csv.cpp hashes a value: with
    its offset basis, 1469598103934665603 (FNV's is 14695981039346656037)."""
    h = 1469598103934665603
    for c in text:
        h = ((h ^ c) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def categories(column):
    return len(column["vocabulary"]) + 1 if "vocabulary" in column else column["hash_buckets"]


def vocabulary(column):
    """value bytes -> id (1-based, 0 = unknown); a file name: one token per line."""
    vocab = column["vocabulary"]
    if isinstance(vocab, str):
        with open(vocab, "rb") as f:
            tokens = [t for t in f.read().split(b"\n") if t]
    else:
        tokens = [t.encode() for t in vocab]
    return {t: i + 1 for i, t in enumerate(tokens)}


def csv_value(column, value, lookup):
    """A categorical value's index in its column (before shared_ids' offset)."""
    if lookup is not None:
        return lookup.get(value, 0)
    return fnv1a(value) % column["hash_buckets"]


def read_csv(table, where):
    """(x float32 [n, features], labels int64 [n]) as csv.cpp reads them."""
    columns = table["columns"]
    delimiter = table.get("delimiter", ",").encode()
    first_id, ids = [], 0
    for c in columns:
        first_id.append(ids)
        if table.get("shared_ids") and c["kind"] == "categorical" and not c.get("one_hot"):
            ids += categories(c)
    lookups = [vocabulary(c) if "vocabulary" in c else None for c in columns]
    xs, labels = [], []
    for path in table["files"]:
        with open(path, "rb") as f:
            lines = f.read().split(b"\n")
        for number, line in enumerate(lines, 1):
            if (number == 1 and table.get("header")) or line in (b"", b"\r"):
                continue
            fields = line.replace(b"\r", b"").split(delimiter)
            if len(fields) != len(columns):
                raise JobError(f"{path}:{number}: {len(fields)} fields, expected {len(columns)} ({where}.columns)")
            x = []
            for c, value, first, lookup in zip(columns, fields, first_id, lookups):
                if c["kind"] == "label":
                    labels.append(int(float(value)))
                elif c["kind"] == "numeric":
                    x.append(float(value) if value else 0.0)
                elif c["kind"] == "categorical" and c.get("one_hot"):
                    hot = [0.0] * categories(c)
                    hot[csv_value(c, value, lookup)] = 1.0
                    x.extend(hot)
                elif c["kind"] == "categorical":
                    x.append(first + csv_value(c, value, lookup))
            xs.append(x)
    return np.array(xs, dtype=np.float32), np.array(labels, dtype=np.int64)


def apply_ops(x, y, ops, where):
    """map, filter and skip in order; the rest (shard, shuffle, repeat,
    batch, prefetch) shape the stream, not the examples."""
    for k, op in enumerate(ops):
        if op["type"] == "map":
            first = op.get("first", 0)
            end = first + op["count"] if op.get("count") else x.shape[1]
            part = x[:, first:end]
            transform = op.get("transform", "scale")
            if transform == "scale":
                part *= np.float32(op.get("factor", 0))
            elif transform == "normalize":
                part[:] = (part - np.float32(op.get("mean", 0))) / np.float32(op["stddev"])
            elif transform == "log1p":
                part[:] = np.log1p(np.maximum(part, 0))
            else:
                raise JobError(f"{where}.ops[{k}].transform: {transform} (expected scale, normalize or log1p)")
        elif op["type"] == "filter":
            keep = np.isin(y, op["labels"])
            x, y = x[keep], y[keep]
        elif op["type"] == "skip":
            x, y = x[op["count"]:], y[op["count"]:]
    return x, y


def read_dataset(job, where):
    table = job.get(where)
    if table is None:
        raise JobError(f"no [{where}] table")
    if table.get("source") == "idx":
        images, labels = read_idx(table["images"]), read_idx(table["labels"])
        x, y = images.reshape(len(images), -1).numpy().astype(np.float32), labels.numpy().astype(np.int64)
    elif table.get("source") == "csv":
        x, y = read_csv(table, where)
    else:
        raise JobError(f"{where}.source: {table.get('source')} (this tool reads idx and csv)")
    ops = table.get("ops", [])
    x, y = apply_ops(x, y, ops, where)
    batch = next((op["size"] for op in ops if op["type"] == "batch"), 1)
    return torch.from_numpy(x), torch.from_numpy(y), batch, any(op["type"] == "shuffle" for op in ops)


def actorps_init(model):
    """actorps' initializers: Glorot-uniform kernels (Keras' fans), zero biases."""
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.Conv2d)):
            nn.init.xavier_uniform_(m.weight)
            nn.init.zeros_(m.bias)


def optimizers(training, model):
    """actorps' optimizer (TF's formulas); embedding tables get sparse gradients."""
    kind, lr = training.get("optimizer", "sgd"), training.get("learning_rate", 0.01)
    tables = {id(p) for m in model.modules() if isinstance(m, Embedding) for p in m.parameters()}
    dense = [p for p in model.parameters() if id(p) not in tables]
    sparse = [p for p in model.parameters() if id(p) in tables]
    if kind == "adam":
        out = [torch.optim.Adam(dense, lr=lr, eps=1e-7)]
        return out + ([torch.optim.SparseAdam(sparse, lr=lr, eps=1e-7)] if sparse else [])
    if kind == "adagrad":
        return [torch.optim.Adagrad(model.parameters(), lr=lr, initial_accumulator_value=0.1, eps=1e-7)]
    if kind == "momentum":  # tables' gradients made dense in step(): every row's velocity decays
        return [torch.optim.SGD(model.parameters(), lr=lr, momentum=training.get("momentum", 0.9),
                                nesterov=training.get("nesterov", False))]
    if kind == "sgd":
        return [torch.optim.SGD(model.parameters(), lr=lr)]
    raise JobError(f"training.optimizer: {kind} (expected sgd, momentum, adam or adagrad)")


def batches(n, size, shuffle, seed):
    """Index batches forever: passes (permuted when the job shuffles), batched across them."""
    gen = torch.Generator().manual_seed(seed)
    pending = torch.empty(0, dtype=torch.long)
    while True:
        order = torch.randperm(n, generator=gen) if shuffle else torch.arange(n)
        pending = torch.cat([pending, order])
        while len(pending) >= size:
            yield pending[:size]
            pending = pending[size:]


def roc_auc(scores, labels):
    """actorps' kernels::roc_auc: pairs won, ties counted half."""
    order = np.argsort(scores, kind="stable")
    s, y = scores[order], labels[order].astype(np.float64)
    _, start, counts = np.unique(s, return_index=True, return_counts=True)
    pos = np.add.reduceat(y, start)
    neg = counts - pos
    below = np.cumsum(neg) - neg
    if pos.sum() == 0 or neg.sum() == 0:
        return float("nan")
    return float((pos * (below + 0.5 * neg)).sum() / (pos.sum() * neg.sum()))


def evaluate(model, spec, x, y, batch):
    model.eval()
    with torch.no_grad():
        logits = torch.cat([model(x[i:i + batch]) for i in range(0, len(y), batch)])
    model.train()
    loss = loss_function(spec)(logits, y).item()
    if spec.get("loss") != "sigmoid_bce":
        return f"accuracy {(logits.argmax(1) == y).float().mean().item():.4f} loss {loss:.4f}"
    z = logits[:, 0].double().numpy()
    p = np.clip(1 / (1 + np.exp(-z)), 1e-15, 1 - 1e-15)
    yn = y.numpy()
    log_loss = float(-np.where(yn == 1, np.log(p), np.log1p(-p)).mean())
    accuracy = float(((z > 0) == (yn == 1)).mean())
    return f"accuracy {accuracy:.4f} loss {loss:.4f} auc {roc_auc(z, yn):.4f} log_loss {log_loss:.4f}"


def step(model, opts, loss_of, x, y):
    for o in opts:
        o.zero_grad()
    loss_of(model(x), y).backward()
    for o in opts:
        if isinstance(o, torch.optim.SGD) and o.defaults["momentum"]:
            for p in model.parameters():
                if p.grad is not None and p.grad.is_sparse:
                    p.grad = p.grad.to_dense()
        o.step()


def train(args, job, spec):
    training = job.get("training", {})
    x, y, batch, shuffle = read_dataset(job, "dataset")
    ex, ey, eval_batch, _ = read_dataset(job, "eval_dataset")
    torch.manual_seed(args.seed)
    model = Graph(spec)
    actorps_init(model)
    opts, loss_of = optimizers(training, model), loss_function(spec)
    steps = training.get("steps_per_epoch") or -(-len(y) // batch)
    stream = batches(len(y), batch, shuffle, args.seed)
    total, result = 0.0, ""
    for epoch in range(1, args.epochs + 1):
        for o in opts:
            for g in o.param_groups:
                g["lr"] = training.get("learning_rate", 0.01) * training.get("learning_rate_decay", 1.0) ** (epoch - 1)
        start = time.perf_counter()
        for _ in range(steps):
            i = next(stream)
            step(model, opts, loss_of, x[i], y[i])
        seconds = time.perf_counter() - start
        total += seconds
        result = evaluate(model, spec, ex, ey, eval_batch)
        print(f"epoch {epoch} seconds {seconds:.1f} {result}", flush=True)
    print(f"final {result} epochs {args.epochs} steps_per_epoch {steps} batch {batch} seconds {total:.1f} "
          f"job {args.job}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("job")
    parser.add_argument("--epochs", type=int, help="default: the job's training.epochs")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    parser.add_argument("--seed", type=int, help="default: the job's training.seed (1)")
    parser.add_argument("--actorps", default=os.path.join(ROOT, "build/apps/actorps"),
                        help="the actorps program that resolves the model (default: build/apps/actorps)")
    parser.add_argument("--dump-rows", type=int, help="print [dataset]'s first N examples and exit")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    try:
        with open(args.job, "rb") as f:
            job = tomllib.load(f)
        if args.dump_rows is not None:
            x, y, _, _ = read_dataset(job, "dataset")
            for row, label in zip(x[:args.dump_rows].tolist(), y[:args.dump_rows].tolist()):
                print(label, " ".join(f"{v:.9g}" for v in row))
            return 0
        training = job.get("training", {})
        args.epochs = args.epochs or training.get("epochs", 1)
        args.seed = training.get("seed", 1) if args.seed is None else args.seed
        train(args, job, model_json(args.job, args.actorps))
    except KeyError as e:
        print(f"torch_zoo: {args.job}: missing key {e}", file=sys.stderr)
        return 2
    except (JobError, OSError, tomllib.TOMLDecodeError) as e:
        print(f"torch_zoo: {args.job}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
