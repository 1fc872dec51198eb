#!/usr/bin/python3
"""The PyTorch peers of `actorps bench embeddings`: config/dlrm_dynamic.toml's
DLRM on `actorps data criteo`'s files, one pass, in one process or as a
parameter server over torch.distributed.rpc.

    torch_dlrm.py single --data DIR [--threads 1,2] [--seed 1]
    torch_dlrm.py rpc    --data DIR [--seed 1] [--port 29518]   # 1 PS + 2 trainers, 3 processes, TCP

The model: a bottom MLP 13-64-16 (ReLU) over log(1 + count) of the 13
counts (missing: 0), one table of rows of 16 shared by the 26 categorical
fields, the dot products of every pair of the 27 vectors (bottom + 26 rows,
351) beside the bottom vector (367), a top MLP 128-64-1 (ReLU), sigmoid
cross-entropy; actorps' initializers (Glorot-uniform kernels, zero biases,
rows uniform in +-0.05). Adam, lr 0.001, eps 1e-7 (actorps' and TF's) on
the dense variables, SparseAdam (lazy: the moments of the rows in the batch
only, as actorps' shard) on the table; batch 256; ceil(train / 256) steps
over a seeded permutation (batches run on into the next one).

PyTorch needs indices where actorps keys rows by 64-bit id (XXH64 of the
value, seeded by its column): the vocabulary is every (field, value) of the
training file, an empty value too, one row each in order of first sight;
a test value the training file never had reads row 0, which no training
example touches (it keeps its initial values, as an id with no row reads
its initial values in actorps). Unlike actorps' table (min_count = 2) a
value seen once gets a row and its gradients.

`single` trains a pass per --threads entry (torch.set_num_threads), each
from the same initial values. Prints one line per pass, after the test
file is scored:
`run MODE threads T examples N seconds S examples_per_s R auc A log_loss L
rows V` (S: training only; AUC exact, ties counted half, as actorps'). The
RPC job: rank 0 holds the model (dense variables and table, with their
optimizers); each trainer reads its half of the training examples, pulls
the dense variables and the rows of its batch's distinct ids before each
step and pushes their gradients back, applied as they come (async, under
a lock). If RPC cannot start here, prints `rpc unavailable: WHY` and exits
3. Run with Debian's /usr/bin/python3 and python3-torch, as the bench does.
"""
import argparse
import math
import os
import sys
import tempfile
import threading
import time

import numpy as np
import torch
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp
import torch.nn as nn

from torch_zoo import batches, roc_auc

FIELDS, COUNTS, DIM, BATCH, LR = 26, 13, 16, 256, 0.001


def read_tsv(path, vocab, grow):
    """(counts float32 [n, 13] as log1p, ids int64 [n, 26], labels float32 [n]);
    `vocab` maps (field, value) to a row, grown when `grow`, else 0 for unknown."""
    counts, ids, labels = [], [], []
    with open(path, "rb") as f:
        for line in f:
            fields = line.rstrip(b"\n").split(b"\t")
            labels.append(float(fields[0]))
            counts.append([float(v) if v else 0.0 for v in fields[1:1 + COUNTS]])
            row = []
            for k, value in enumerate(fields[1 + COUNTS:]):
                key = (k, value)
                index = vocab.get(key)
                if index is None:
                    index = len(vocab) + 1 if grow else 0
                    if grow:
                        vocab[key] = index
                row.append(index)
            ids.append(row)
    x = np.log1p(np.maximum(np.array(counts, dtype=np.float32), 0))
    return torch.from_numpy(x), torch.tensor(ids, dtype=torch.int64), torch.tensor(labels)


def load(data_dir):
    vocab = {}
    train = read_tsv(os.path.join(data_dir, "train.tsv"), vocab, True)
    test = read_tsv(os.path.join(data_dir, "test.tsv"), vocab, False)
    return train, test, len(vocab) + 1


def interact(bottom, rows):
    """[B, 16] and [B, 26, 16] -> [B, 367]: bottom, then each pair's dot product."""
    z = torch.cat([bottom.unsqueeze(1), rows], 1)
    dots = torch.bmm(z, z.transpose(1, 2))
    i, j = torch.triu_indices(FIELDS + 1, FIELDS + 1, 1)
    return torch.cat([bottom, dots[:, i, j]], 1)


class Dense(nn.Module):
    """DLRM less its table: the bottom and top MLPs."""

    def __init__(self):
        super().__init__()
        self.bottom = nn.Sequential(nn.Linear(COUNTS, 64), nn.ReLU(), nn.Linear(64, DIM), nn.ReLU())
        pairs = (FIELDS + 1) * FIELDS // 2
        self.top = nn.Sequential(nn.Linear(DIM + pairs, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(),
                                 nn.Linear(64, 1))
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, counts, rows):
        return self.top(interact(self.bottom(counts), rows)).squeeze(1)


def make_table(rows):
    table = nn.Embedding(rows, DIM, sparse=True)
    nn.init.uniform_(table.weight, -0.05, 0.05)
    return table


def optimizers(dense, table):
    return (torch.optim.Adam(dense.parameters(), lr=LR, eps=1e-7),
            torch.optim.SparseAdam(table.parameters(), lr=LR, eps=1e-7))


def score(dense, table, test):
    with torch.no_grad():
        z = torch.cat([dense(test[0][i:i + 1000], table(test[1][i:i + 1000]))
                       for i in range(0, len(test[2]), 1000)]).double().numpy()
    y = test[2].numpy()
    p = np.clip(1 / (1 + np.exp(-z)), 1e-15, 1 - 1e-15)
    return roc_auc(z, y), float(-np.where(y == 1, np.log(p), np.log1p(-p)).mean())


def report(mode, threads, examples, seconds, auc, log_loss, rows):
    print(f"run {mode} threads {threads} examples {examples} seconds {seconds:.2f} "
          f"examples_per_s {examples / seconds:.0f} auc {auc:.4f} log_loss {log_loss:.4f} rows {rows}", flush=True)


def train_steps(train, rows, seed, steps):
    """A fresh model trained `steps` steps: (dense, table, examples, seconds)."""
    torch.manual_seed(seed)
    dense, table = Dense(), make_table(rows)
    opts, loss_fn = optimizers(dense, table), nn.BCEWithLogitsLoss()
    stream = batches(len(train[2]), BATCH, True, seed)
    examples, start = 0, time.perf_counter()
    for _ in range(steps):
        i = next(stream)
        for o in opts:
            o.zero_grad()
        loss_fn(dense(train[0][i], table(train[1][i])), train[2][i]).backward()
        for o in opts:
            o.step()
        examples += len(i)
    return dense, table, examples, time.perf_counter() - start


def single(args):
    """A pass for each of --threads, each from the same initial values."""
    train, test, rows = load(args.data)
    for threads in (int(t) for t in args.threads.split(",")):
        torch.set_num_threads(threads)
        dense, table, examples, seconds = train_steps(train, rows, args.seed, math.ceil(len(train[2]) / BATCH))
        report("single", threads, examples, seconds, *score(dense, table, test), rows)


# --- the RPC parameter server: rank 0 is the PS, ranks 1 and 2 train. ---

class ParameterServer:
    def __init__(self, seed, rows):
        torch.manual_seed(seed)
        self.dense, self.table, self.lock = Dense(), make_table(rows), threading.Lock()
        self.opts = optimizers(self.dense, self.table)
        self.finished, self.examples, self.first_pull, self.last = threading.Condition(), 0, None, None
        self.trainers_done = 0

    def pull(self, ids):
        with self.lock:
            if self.first_pull is None:
                self.first_pull = time.perf_counter()
            return [p.detach().clone() for p in self.dense.parameters()], self.table.weight[ids].detach().clone()

    def push(self, grads, ids, row_grads, examples):
        with self.lock:
            for p, g in zip(self.dense.parameters(), grads):
                p.grad = g
            self.table.weight.grad = torch.sparse_coo_tensor(ids.unsqueeze(0), row_grads, self.table.weight.shape)
            for o in self.opts:
                o.step()
            self.examples += examples

    def done(self):
        with self.finished:
            self.trainers_done += 1
            self.last = time.perf_counter()
            self.finished.notify_all()


PS = None


def ps_call(method, *args):
    return getattr(PS, method)(*args)


def trainer(rank, args, train, steps):
    torch.set_num_threads(1)
    counts, ids, labels = (t[rank - 1::2] for t in train)  # each trainer its half, as each worker's
    dense, loss_fn = Dense(), nn.BCEWithLogitsLoss()
    stream = batches(len(labels), BATCH, True, args.seed + rank)
    for _ in range(steps):
        i = next(stream)
        distinct, inverse = torch.unique(ids[i], return_inverse=True)
        values, rows = rpc.rpc_sync("ps", ps_call, args=("pull", distinct))
        for p, v in zip(dense.parameters(), values):
            p.data.copy_(v)
        rows.requires_grad_(True)
        dense.zero_grad()
        loss_fn(dense(counts[i], rows[inverse]), labels[i]).backward()
        rpc.rpc_sync("ps", ps_call, args=("push", [p.grad for p in dense.parameters()], distinct, rows.grad, len(i)))
    rpc.rpc_sync("ps", ps_call, args=("done",))


def rpc_process(rank, args, path):
    global PS
    torch.set_num_threads(1)
    data = torch.load(path)
    options = rpc.TensorPipeRpcBackendOptions(init_method=f"tcp://127.0.0.1:{args.port}", rpc_timeout=120)
    if rank == 0:
        PS = ParameterServer(args.seed, data["rows"])
    rpc.init_rpc("ps" if rank == 0 else f"trainer{rank}", rank=rank, world_size=3, rpc_backend_options=options)
    steps = math.ceil(len(data["train"][2]) / BATCH)
    if rank > 0:
        trainer(rank, args, data["train"], (steps + 2 - rank) // 2)  # the job's steps, split between the two
    else:
        with PS.finished:
            PS.finished.wait_for(lambda: PS.trainers_done == 2)
        report("rpc", 1, PS.examples, PS.last - PS.first_pull, *score(PS.dense, PS.table, data["test"]),
               data["rows"])
    rpc.shutdown()


def run_rpc(args):
    train, test, rows = load(args.data)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "data.pt")
        torch.save({"train": train, "test": test, "rows": rows}, path)
        try:
            mp.spawn(rpc_process, args=(args, path), nprocs=3, join=True)
        except Exception as e:  # noqa: BLE001: any failure to start or run RPC is reported, not hidden
            lines = str(e).strip().splitlines()
            print(f"rpc unavailable: {lines[-1] if lines else type(e).__name__}", flush=True)
            return 3
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mode", choices=["single", "rpc"])
    parser.add_argument("--data", required=True, help="actorps data criteo's --out (train.tsv, test.tsv)")
    parser.add_argument("--threads", default="1,2", help="single: torch threads, a pass each")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--port", type=int, default=29518, help="rpc: the rendezvous' TCP port")
    args = parser.parse_args()
    if args.mode == "rpc":
        return run_rpc(args)
    single(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
