#!/usr/bin/python3
"""The PyTorch side of `actorps bench kernels`: forward + backward of the
seed CNN (NHWC input converted as torch wants it), same batch and threads.
Prints one line: samples_per_s=<float>. Run with Debian's /usr/bin/python3
and python3-torch; the bench sets OpenBLAS and a non-trimming malloc."""
import argparse
import time

import torch
import torch.nn as nn

from torch_train import seed_cnn

parser = argparse.ArgumentParser()
parser.add_argument("--batch", type=int, required=True)
parser.add_argument("--threads", type=int, required=True)
parser.add_argument("--iterations", type=int, default=50)
parser.add_argument("--repetitions", type=int, default=5)
args = parser.parse_args()

torch.set_num_threads(args.threads)
torch.manual_seed(0)
model = seed_cnn()
loss_fn = nn.CrossEntropyLoss()
x = torch.rand(args.batch, 1, 28, 28)
y = torch.randint(0, 10, (args.batch,))


def step():
    model.zero_grad(set_to_none=False)
    loss = loss_fn(model(x), y)
    loss.backward()


for _ in range(10):
    step()
rates = []
for _ in range(args.repetitions):
    start = time.perf_counter()
    for _ in range(args.iterations):
        step()
    rates.append(args.batch * args.iterations / (time.perf_counter() - start))
rates.sort()
print(f"samples_per_s={rates[len(rates) // 2]:.1f}")
