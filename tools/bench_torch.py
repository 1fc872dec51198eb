#!/usr/bin/python3
"""The PyTorch side of `actorps bench kernels`: forward + backward of the
seed CNN (NHWC input converted as torch wants it), or with --model of any
model JSON (tools/torch_model.py's Graph), same batch and threads.
Prints one line: samples_per_s=<float>. Run with Debian's /usr/bin/python3
and python3-torch; the bench sets OpenBLAS and a non-trimming malloc."""
import argparse
import json
import time

import torch
import torch.nn as nn

from torch_model import Graph, loss_function, model_inputs, node_names, node_sources
from torch_train import seed_cnn

parser = argparse.ArgumentParser()
parser.add_argument("--batch", type=int, required=True)
parser.add_argument("--threads", type=int, required=True)
parser.add_argument("--iterations", type=int, default=50)
parser.add_argument("--repetitions", type=int, default=5)
parser.add_argument("--model", help="a model JSON (actorps' export metadata); default: the seed CNN")
args = parser.parse_args()


def vocabulary(spec, name):
    """The smallest vocabulary of the embeddings reading input `name`."""
    names, sizes = node_names(spec), []
    for k, layer in enumerate(spec["layers"]):
        if layer["type"] == "embedding" and name in node_sources(spec, names, k):
            sizes.append(layer["vocabulary"])
    return min(sizes)


def random_batch(spec, n):
    """Examples as actorps' bench draws them: floats uniform in [0, 1), ids
    uniform below their vocabulary, labels among the classes."""
    parts = []
    for i in model_inputs(spec):
        width = int(torch.tensor(i["shape"]).prod())
        if i["kind"] == "ids":
            parts.append(torch.randint(0, vocabulary(spec, i["name"]), (n, width)).float())
        else:
            parts.append(torch.rand(n, width))
    last = spec["layers"][-1]
    classes = 2 if spec.get("loss") == "sigmoid_bce" else last.get("units", 10)
    return torch.cat(parts, 1), torch.arange(n) % classes


torch.set_num_threads(args.threads)
torch.manual_seed(0)
if args.model:
    with open(args.model) as f:
        spec = json.load(f)
    model, loss_fn = Graph(spec), loss_function(spec)
    x, y = random_batch(spec, args.batch)
else:
    model, loss_fn = seed_cnn(), nn.CrossEntropyLoss()
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
