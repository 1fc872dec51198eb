#!/usr/bin/python3
"""The PyTorch peers of `actorps bench tta`: the seed CNN trained on
Fashion-MNIST (batch 64, the job's optimizer: SGD with its momentum or
Adam, and its per-epoch learning-rate decay, the data scaled by 1/255), in
one process or as a parameter server over torch.distributed.rpc.

    torch_train.py single --lr 0.1 --seed 1 --epochs 10 --threads 2 [--momentum 0.9 --decay 0.85]
    torch_train.py single --optimizer adam --lr 0.002 --decay 0.7
    torch_train.py rpc    --lr 0.1 --seed 1 --epochs 10   # 1 PS + 2 trainers, 3 processes, TCP

Prints one line per epoch, after it is evaluated on the 10,000 test images:
`epoch E seconds S accuracy A samples_per_s R` (S: training time so far,
evaluation excluded). The RPC job is PyTorch's own parameter-server recipe
(the "RPC parameter server" tutorial's shape): each trainer reads its half
of the data, fetches the parameters from the PS before each step and sends
its gradients back, applied as they come (async, under a lock). Run with
Debian's /usr/bin/python3 and python3-torch, as `actorps bench tta` does.
"""
import argparse
import os
import threading
import time

import torch
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp
import torch.nn as nn

from torch_model import read_idx


def seed_cnn():
    return nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(13 * 13 * 32, 64), nn.ReLU(), nn.Linear(64, 10))


def load(data_dir, split):
    prefix = os.path.join(data_dir, "train" if split == "train" else "t10k")
    images = read_idx(prefix + "-images-idx3-ubyte").float().div(255).reshape(-1, 1, 28, 28)
    return images, read_idx(prefix + "-labels-idx1-ubyte").long()


def accuracy(model, test):
    with torch.no_grad():
        return (model(test[0]).argmax(1) == test[1]).float().mean().item()


def batches(data, seed, epoch, batch=64):
    order = torch.randperm(len(data[1]), generator=torch.Generator().manual_seed(seed * 1000 + epoch))
    for i in range(0, len(order) - batch + 1, batch):
        idx = order[i:i + batch]
        yield data[0][idx], data[1][idx]


def epoch_lr(args, epoch):
    return args.lr * args.decay ** (epoch - 1)  # as the job's learning_rate_decay


def optimizer(args, params):
    if args.optimizer == "adam":  # eps as actorps' (TF's) default
        return torch.optim.Adam(params, lr=args.lr, eps=1e-7)
    return torch.optim.SGD(params, lr=args.lr, momentum=args.momentum)


def single(args):
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    train, test = load(args.data, "train"), load(args.data, "test")
    model, loss_fn = seed_cnn(), nn.CrossEntropyLoss()
    opt = optimizer(args, model.parameters())
    trained, samples = 0.0, 0
    for epoch in range(1, args.epochs + 1):
        for group in opt.param_groups:
            group["lr"] = epoch_lr(args, epoch)
        start = time.perf_counter()
        for x, y in batches(train, args.seed, epoch):
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
            samples += len(y)
        trained += time.perf_counter() - start
        print(f"epoch {epoch} seconds {trained:.2f} accuracy {accuracy(model, test):.4f} "
              f"samples_per_s {samples / trained:.0f}", flush=True)


# --- the RPC parameter server: rank 0 is the PS, ranks 1 and 2 train. ---

class ParameterServer:
    def __init__(self, args):
        torch.manual_seed(args.seed)
        self.model, self.args, self.lock = seed_cnn(), args, threading.Lock()
        self.opt = optimizer(args, self.model.parameters())
        self.done, self.epochs_done, self.samples, self.evaluated = {}, threading.Condition(), 0, 0

    def parameters(self):
        with self.lock:
            return [p.detach().clone() for p in self.model.parameters()]

    def push(self, grads, samples):
        with self.lock:
            for p, g in zip(self.model.parameters(), grads):
                p.grad = g
            self.opt.step()
            self.samples += samples

    def epoch_done(self, epoch):
        with self.epochs_done:
            self.done[epoch] = self.done.get(epoch, 0) + 1
            if self.done[epoch] == 2:  # both trainers finished it: the next epoch's rate
                with self.lock:
                    for group in self.opt.param_groups:
                        group["lr"] = epoch_lr(self.args, epoch + 1)
            self.epochs_done.notify_all()
            # The trainer waits while the PS evaluates the epoch, as actorps'
            # workers do: no training in the time that is not counted.
            self.epochs_done.wait_for(lambda: self.evaluated >= epoch)

    def evaluation_done(self, epoch):
        with self.epochs_done:
            self.evaluated = epoch
            self.epochs_done.notify_all()


PS = None


def ps_call(method, *args):
    return getattr(PS, method)(*args)


def trainer(rank, args):
    torch.set_num_threads(1)
    train = load(args.data, "train")
    shard = (train[0][rank - 1::2], train[1][rank - 1::2])  # each trainer its half, as each worker's shard
    model, loss_fn = seed_cnn(), nn.CrossEntropyLoss()
    for epoch in range(1, args.epochs + 1):
        for x, y in batches(shard, args.seed + rank, epoch):
            for p, v in zip(model.parameters(), rpc.rpc_sync("ps", ps_call, args=("parameters",))):
                p.data.copy_(v)
            model.zero_grad()
            loss_fn(model(x), y).backward()
            rpc.rpc_sync("ps", ps_call, args=("push", [p.grad for p in model.parameters()], len(y)))
        rpc.rpc_sync("ps", ps_call, args=("epoch_done", epoch), timeout=0)  # waits for the other trainer


def parameter_server(args):
    global PS
    torch.set_num_threads(1)
    PS = ParameterServer(args)
    test = load(args.data, "test")
    rpc.init_rpc("ps", rank=0, world_size=3)
    start, evaluating = time.perf_counter(), 0.0
    for epoch in range(1, args.epochs + 1):
        with PS.epochs_done:
            PS.epochs_done.wait_for(lambda: PS.done.get(epoch, 0) == 2)
        trained = time.perf_counter() - start - evaluating
        eval_start = time.perf_counter()
        model = seed_cnn()
        for p, v in zip(model.parameters(), PS.parameters()):
            p.data.copy_(v)
        acc = accuracy(model, test)
        evaluating += time.perf_counter() - eval_start
        PS.evaluation_done(epoch)
        print(f"epoch {epoch} seconds {trained:.2f} accuracy {acc:.4f} samples_per_s {PS.samples / trained:.0f}",
              flush=True)
    rpc.shutdown()


def rpc_process(rank, args):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(args.port)
    if rank == 0:
        parameter_server(args)
    else:
        rpc.init_rpc(f"trainer{rank}", rank=rank, world_size=3)
        trainer(rank, args)
        rpc.shutdown()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mode", choices=["single", "rpc"])
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd", help="the job's")
    parser.add_argument("--momentum", type=float, default=0.0, help="SGD momentum (the job's)")
    parser.add_argument("--decay", type=float, default=1.0, help="learning rate x decay per epoch (the job's)")
    parser.add_argument("--threads", type=int, default=2, help="single: intra-op threads")
    parser.add_argument("--port", type=int, default=29517, help="rpc: the PS's TCP port")
    parser.add_argument("--data", default="data/fashion")
    args = parser.parse_args()
    if args.mode == "single":
        single(args)
    else:
        mp.spawn(rpc_process, args=(args,), nprocs=3, join=True)


if __name__ == "__main__":
    main()
