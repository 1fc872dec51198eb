#!/usr/bin/env python3
"""PyTorch's side of tests/test_parity.cpp's ONNX route: for each model (an
MLP, a small CNN, the seed CNN), 20 steps of plain SGD over the first 20
batches of 64 of DATA/train-*-ubyte in file order (pixels / 255, no shuffle). Writes OUT/NAME.onnx (the initial weights),
OUT/NAME.losses (float64, the loss of each step, before its update) and
OUT/NAME_final.onnx (the same graph with the trained weights: actorps's
importer turns them into its own layouts for the comparison).

Usage: /usr/bin/python3 tests/parity.py DATA OUT
"""
import os
import sys

import numpy as np
import onnx
import torch
from torch import nn

STEPS, BATCH, LEARNING_RATE = 20, 64, 0.1


def mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 32), nn.ReLU(), nn.Linear(32, 10))


def cnn():
    return nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 13 * 13, 10))


def seed_cnn():  # config/seed_cnn.toml's layers
    return nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 13 * 13, 64),
                         nn.ReLU(), nn.Linear(64, 10))


def read_images(data, n):
    images = np.fromfile(os.path.join(data, "train-images-idx3-ubyte"), np.uint8, n * 784, offset=16)
    labels = np.fromfile(os.path.join(data, "train-labels-idx1-ubyte"), np.uint8, n, offset=8)
    x = torch.from_numpy(images.astype(np.float32) * np.float32(1 / 255)).reshape(n, 1, 28, 28)
    return x, torch.from_numpy(labels.astype(np.int64))


def export(model, path):
    torch.onnx.export(model, torch.zeros(1, 1, 28, 28), path, input_names=["x"], output_names=["logits"],
                      opset_version=14, dynamic_axes={"x": {0: "batch"}, "logits": {0: "batch"}})
    onnx.checker.check_model(path)


def train(model, x, y):
    sgd = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    losses = []
    for s in range(STEPS):
        sgd.zero_grad()
        loss = nn.functional.cross_entropy(model(x[s * BATCH:(s + 1) * BATCH]), y[s * BATCH:(s + 1) * BATCH])
        loss.backward()
        sgd.step()
        losses.append(loss.item())
    return losses


def main():
    data, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(11)
    x, y = read_images(data, STEPS * BATCH)
    for name, model in [("mlp", mlp()), ("cnn", cnn()), ("seed_cnn", seed_cnn())]:
        export(model, os.path.join(out, name + ".onnx"))
        np.array(train(model, x, y), np.float64).tofile(os.path.join(out, name + ".losses"))
        export(model, os.path.join(out, name + "_final.onnx"))


if __name__ == "__main__":
    main()
