#!/usr/bin/env python3
"""PyTorch's side of tests/test_parity.cpp for models defined in TOML (the
graph route): actorps created the initial values; the test wrote them as
DIR/NAME.safetensors (actorps' layouts, the model's JSON in the metadata)
and the job's own batches, in the order it reads them, as DIR/NAME.x
(float32 [n, input size]) and DIR/NAME.y (int32 [n]). tools/torch_model.py's
Graph trains on them, in training mode (batch norm on batch statistics),
for STEPS steps of plain SGD at LEARNING_RATE, a batch of n / STEPS rows
each; it writes DIR/NAME.losses (float64, each step's loss before its update) and
DIR/NAME.final (float32, the final values in the safetensors' order and
actorps' layouts, moving statistics included).

Usage: /usr/bin/python3 tests/parity_graph.py DIR NAME LEARNING_RATE
"""
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import torch_model  # noqa: E402

STEPS = 20


def main():
    prefix = os.path.join(sys.argv[1], sys.argv[2])
    tensors, metadata = torch_model.read_safetensors(prefix + ".safetensors")
    spec = json.loads(metadata["model"])
    model = torch_model.Graph(spec, tensors).train()
    y = torch.from_numpy(np.fromfile(prefix + ".y", np.int32).astype(np.int64))
    x = torch.from_numpy(np.fromfile(prefix + ".x", np.float32)).reshape(len(y), -1)
    batch = len(y) // STEPS
    loss_of = torch_model.loss_function(spec)
    sgd = torch.optim.SGD(model.parameters(), lr=float(sys.argv[3]))
    losses = []
    for s in range(STEPS):
        sgd.zero_grad()
        loss = loss_of(model(x[s * batch:(s + 1) * batch]), y[s * batch:(s + 1) * batch])
        loss.backward()
        sgd.step()
        losses.append(loss.item())
    np.array(losses, np.float64).tofile(prefix + ".losses")
    final = model.actorps_tensors()
    np.concatenate([final[name].reshape(-1).numpy() for name in tensors]).astype(np.float32).tofile(prefix + ".final")


if __name__ == "__main__":
    main()
