#!/usr/bin/python3
"""Loads a model `actorps export` wrote (safetensors) into PyTorch.

As a module: `model = torch_model.load("model.safetensors")` gives a
torch.nn.Sequential taking NCHW images (N, C, H, W) and returning logits.
As a program: evaluates it on IDX files (the MNIST format) and prints
`loss <mean cross-entropy> accuracy <fraction> examples <n>`:

    tools/torch_model.py model.safetensors --images t10k-images-idx3-ubyte \
        --labels t10k-labels-idx1-ubyte --scale 0.00392156862745098

The file is read with the standard library (safetensors: 8-byte
little-endian header size, JSON header, raw data), so only python3-torch is
needed. Layouts are converted as the header's metadata states them:
conv2d kernels HWIO -> OIHW, dense kernels [in, out] -> weight [out, in],
and flatten takes HWC order (the image is permuted NCHW -> NHWC first)."""
import argparse
import json
import struct
import sys

import torch
import torch.nn as nn


def read_safetensors(path):
    """(tensors by name, metadata dict)."""
    with open(path, "rb") as f:
        raw = f.read()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + size])
    metadata = header.pop("__metadata__", {})
    data = raw[8 + size:]
    tensors = {}
    for name, info in header.items():
        if info["dtype"] != "F32":
            raise ValueError(f"{path}: tensor {name}: dtype {info['dtype']}, expected F32")
        begin, end = info["data_offsets"]
        t = torch.frombuffer(bytearray(data[begin:end]), dtype=torch.float32)
        tensors[name] = t.reshape(info["shape"])
    return tensors, metadata


class FlattenHWC(nn.Module):
    """actorps flattens activations in HWC order; PyTorch's are NCHW."""

    def forward(self, x):
        return x.permute(0, 2, 3, 1).flatten(1) if x.dim() == 4 else x.flatten(1)


def build(tensors, metadata):
    spec = json.loads(metadata["model"])
    channels = spec["input"][2]
    layers, index = [], {"conv2d": 0, "dense": 0}
    for layer in spec["layers"]:
        kind = layer["type"]
        if any(key in layer for key in ("stride", "strides", "pads")):
            raise ValueError(f"layer type {kind} with strides or pads is not supported by this loader")
        if kind == "conv2d":
            kernel = tensors[f"conv2d_{index['conv2d']}/kernel"]  # [kh, kw, in, out]
            bias = tensors[f"conv2d_{index['conv2d']}/bias"]
            conv = nn.Conv2d(channels, layer["filters"], layer["kernel"],
                             padding=0 if layer["padding"] == "valid" else layer["kernel"] // 2)
            conv.weight.data = kernel.permute(3, 2, 0, 1).contiguous()
            conv.bias.data = bias.clone()
            layers.append(conv)
            channels = layer["filters"]
            index["conv2d"] += 1
        elif kind == "maxpool2d":
            layers.append(nn.MaxPool2d(layer["pool"]))
        elif kind == "flatten":
            layers.append(FlattenHWC())
        elif kind == "dense":
            kernel = tensors[f"dense_{index['dense']}/kernel"]  # [in, out]
            bias = tensors[f"dense_{index['dense']}/bias"]
            dense = nn.Linear(kernel.shape[0], kernel.shape[1])
            dense.weight.data = kernel.t().contiguous()
            dense.bias.data = bias.clone()
            layers.append(dense)
            index["dense"] += 1
        else:
            raise ValueError(f"layer type {kind} is not supported by this loader")
        if layer.get("relu"):
            layers.append(nn.ReLU())
    return nn.Sequential(*layers).eval()


def load(path):
    return build(*read_safetensors(path))


def read_idx(path):
    with open(path, "rb") as f:
        raw = f.read()
    zero, kind, rank = struct.unpack(">HBB", raw[:4])
    if zero != 0 or kind != 0x08:
        raise ValueError(f"{path}: not an IDX file of unsigned bytes")
    dims = struct.unpack(f">{rank}I", raw[4:4 + 4 * rank])
    return torch.frombuffer(bytearray(raw[4 + 4 * rank:]), dtype=torch.uint8).reshape(dims)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model")
    parser.add_argument("--images", required=True)
    parser.add_argument("--labels", required=True)
    parser.add_argument("--scale", type=float, default=1.0, help="x *= scale (the job's map op)")
    args = parser.parse_args()
    tensors, metadata = read_safetensors(args.model)
    height, width, channels = json.loads(metadata["model"])["input"]
    model = build(tensors, metadata)
    images = read_idx(args.images).float().mul(args.scale).reshape(-1, height, width, channels)
    labels = read_idx(args.labels).long()
    with torch.no_grad():
        logits = model(images.permute(0, 3, 1, 2))
        loss = nn.functional.cross_entropy(logits, labels).item()
        accuracy = (logits.argmax(1) == labels).float().mean().item()
    print(f"loss {loss:.6f} accuracy {accuracy:.6f} examples {len(labels)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
