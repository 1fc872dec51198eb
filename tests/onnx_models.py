#!/usr/bin/env python3
"""Small PyTorch models exported to ONNX for tests/test_onnx_import.cpp and
tests/test_onnx_train.cpp: for each, OUT/NAME.onnx, OUT/NAME.x (a few
examples as actorps reads them: float32 rows, images HWC, then any ids as
floats) and OUT/NAME.logits (PyTorch's logits on them, float32 [n, classes]).

Usage: /usr/bin/python3 tests/onnx_models.py OUT
"""
import os
import sys

import onnx
import torch
from torch import nn

N = 4  # examples in NAME.x


class SeedCnn(nn.Module):  # config/seed_cnn.toml's layers
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                                 nn.Linear(32 * 13 * 13, 64), nn.ReLU(), nn.Linear(64, 10))

    def forward(self, x):
        return self.net(x)


class Mlp(nn.Module):  # Gemm, inference Dropout, MatMul + Add, Relu fused into each
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(20, 16)
        self.drop = nn.Dropout(0.5)
        self.w = nn.Parameter(torch.randn(16, 8) * 0.3)
        self.b = nn.Parameter(torch.randn(8) * 0.1)
        self.fc3 = nn.Linear(8, 5)

    def forward(self, x):
        h = self.drop(torch.relu(self.fc1(x)))
        return self.fc3(torch.relu(h @ self.w + self.b))


class Residual(nn.Module):  # same padding, an Add of images with a Relu, Flatten of 4 channels
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(2, 4, 3, padding=1)
        self.c2 = nn.Conv2d(4, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 4 * 4, 3)

    def forward(self, x):
        a = torch.relu(self.c1(x))
        y = nn.functional.max_pool2d(torch.relu(a + self.c2(a)), 2)
        return self.fc(torch.flatten(y, 1))


class TwoInputs(nn.Module):  # an embedding (Gather + ReduceMean) beside a dense branch, concatenated
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 4)
        self.fc = nn.Linear(8, 6)
        self.out = nn.Linear(10, 4)

    def forward(self, features, ids):
        return self.out(torch.cat([torch.relu(self.fc(features)), self.emb(ids).mean(1)], 1))


class FashionMlp(nn.Module):  # tests/test_onnx_train.cpp's job
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(784, 64), nn.ReLU(), nn.Linear(64, 10))

    def forward(self, x):
        return self.net(x)


class ResBlock(nn.Module):  # Conv stride 2 + pads (+ folded BatchNorm), BatchNorm of an Add, Relu, MaxPool stride/pads, residual Add, GlobalAveragePool
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(8, momentum=0.2)
        self.pool = nn.MaxPool2d(3, stride=2, padding=1)
        self.fc = nn.Linear(8, 4)
        for bn in (self.bn1, self.bn2):  # statistics and affine terms that are not the defaults
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2)
            nn.init.uniform_(bn.weight, 0.5, 1.5)
            nn.init.uniform_(bn.bias, -0.5, 0.5)

    def forward(self, x):
        a = torch.relu(self.bn1(self.c1(x)))
        y = self.pool(torch.relu(self.bn2(a + self.c2(a))))  # bn2 reads an Add: not folded
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1))


class GatedMlp(nn.Module):  # LayerNorm, GELU, Sigmoid, Tanh, Dropout, a Mul, Reshape, Softmax, a standalone Relu
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(12, 16)
        self.norm = nn.LayerNorm(16)
        self.gate = nn.Linear(16, 16)
        self.drop = nn.Dropout(0.3)
        self.fc2 = nn.Linear(16, 6)

    def forward(self, x):
        h = nn.functional.gelu(self.norm(self.fc1(x)))
        g = torch.sigmoid(self.gate(h)) * torch.tanh(h)
        return self.fc2(torch.relu(torch.softmax(self.drop(g).reshape(-1, 4, 4), -1).reshape(-1, 16)))


class AvgPool(nn.Module):  # AveragePool with stride and pads (count_include_pad=False), BatchNorm1d
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(2, 4, 3)
        self.pool = nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False)
        self.bn = nn.BatchNorm1d(4 * 3 * 3)
        self.bn.running_mean.uniform_(-0.5, 0.5)
        self.bn.running_var.uniform_(0.5, 2)
        self.fc = nn.Linear(4 * 3 * 3, 3)

    def forward(self, x):
        return self.fc(self.bn(torch.flatten(self.pool(self.c(x)), 1)))


class WidthSoftmax(nn.Module):  # not supported: a Softmax over an image's width (ours: channels last)
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(1, 2, 3)
        self.fc = nn.Linear(2 * 6 * 6, 2)

    def forward(self, x):
        return self.fc(torch.flatten(torch.softmax(self.c(x), -1), 1))


class Sine(nn.Module):  # not supported: Sin
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(20, 3)

    def forward(self, x):
        return self.fc(torch.sin(x))


def export(out, name, model, inputs, opset, dynamic=None):
    model.eval()
    names = [n for n, _ in inputs]
    args = tuple(t for _, t in inputs)
    axes = dynamic or {n: {0: "batch"} for n in names + ["logits"]}
    torch.onnx.export(model, args, os.path.join(out, name + ".onnx"), input_names=names, output_names=["logits"],
                      opset_version=opset, dynamic_axes=axes)
    onnx.checker.check_model(os.path.join(out, name + ".onnx"))
    with torch.no_grad():
        logits = model(*args)
    cols = [(t.permute(0, 2, 3, 1) if t.dim() == 4 else t).reshape(N, -1).float() for t in args]
    torch.cat(cols, 1).numpy().tofile(os.path.join(out, name + ".x"))
    logits.numpy().astype("float32").tofile(os.path.join(out, name + ".logits"))


def count_include_pad(out, name, to):  # NAME.onnx with count_include_pad = 1 on its AveragePool (not supported)
    m = onnx.load(os.path.join(out, name + ".onnx"))
    for n in m.graph.node:
        if n.op_type == "AveragePool":
            n.attribute.append(onnx.helper.make_attribute("count_include_pad", 1))
    onnx.save(m, os.path.join(out, to + ".onnx"))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(7)
    image = torch.rand(N, 1, 28, 28)
    export(out, "seed_cnn", SeedCnn(), [("x", image)], 13)
    export(out, "mlp", Mlp(), [("x", torch.randn(N, 20))], 14)
    export(out, "residual", Residual(), [("x", torch.randn(N, 2, 8, 8))], 17)
    export(out, "two_inputs", TwoInputs(), [("features", torch.randn(N, 8)), ("ids", torch.randint(0, 50, (N, 3)))], 15)
    export(out, "fashion_mlp", FashionMlp(), [("x", image)], 14)
    export(out, "res_block", ResBlock(), [("x", torch.randn(N, 3, 9, 9))], 15)
    export(out, "gated_mlp", GatedMlp(), [("x", torch.randn(N, 12))], 17)
    export(out, "avg_pool", AvgPool(), [("x", torch.randn(N, 2, 7, 7))], 13)
    count_include_pad(out, "avg_pool", "avg_pool_pad")
    export(out, "width_softmax", WidthSoftmax(), [("x", torch.rand(N, 1, 8, 8))], 14)
    export(out, "sine", Sine(), [("x", torch.randn(N, 20))], 14)
    export(out, "dynamic", Mlp(), [("x", torch.randn(N, 20))], 14, {"x": {0: "batch", 1: "features"}})


if __name__ == "__main__":
    main()
