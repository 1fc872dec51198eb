#!/usr/bin/python3
"""Loads a model `actorps export` wrote (safetensors) into PyTorch.

As a module: `model = torch_model.load("model.safetensors")` gives a
torch.nn.Module (Graph) taking the examples as actorps' batches hold them,
x [N, input size] (every input's columns, images HWC, ids as floats), and
returning logits; `Graph(spec)` builds any model JSON with PyTorch's
initial weights (bench kernels --model).
As a program: evaluates it on IDX files (the MNIST format) and prints
`loss <mean cross-entropy> accuracy <fraction> examples <n>`:

    tools/torch_model.py model.safetensors --images t10k-images-idx3-ubyte \
        --labels t10k-labels-idx1-ubyte --scale 0.00392156862745098

The file is read with the standard library (safetensors: 8-byte
little-endian header size, JSON header, raw data), so only python3-torch is
needed. Layouts are converted as the header's metadata states them:
conv2d kernels HWIO -> OIHW, dense kernels [in, out] -> weight [out, in],
and flatten takes HWC order (images run NCHW, permuted back to flatten)."""
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


KINDS = ("conv2d", "maxpool2d", "flatten", "dense", "embedding", "add", "concat")


def model_inputs(spec):
    """The model's inputs as [{name, shape, kind}]: the graph's, or the
    sequential form's one input (ids when node 0 is an embedding)."""
    if spec.get("inputs"):
        return spec["inputs"]
    first = spec["layers"][0]
    if first["type"] == "embedding":
        return [{"name": "x", "shape": [first["inputs"]], "kind": "ids"}]
    return [{"name": "x", "shape": spec["input"], "kind": "float"}]


def node_names(spec):
    """Each node's name: given, or "<type>_<k>" for the k-th node of its type."""
    seen, names = {}, []
    for layer in spec["layers"]:
        k = seen.get(layer["type"], 0)
        seen[layer["type"]] = k + 1
        names.append(layer.get("name") or f"{layer['type']}_{k}")
    return names


def node_sources(spec, names, k):
    """What node k reads: its "inputs" (a list; an embedding's number is its
    ids per example), else the node before it (node 0: the first input)."""
    given = spec["layers"][k].get("inputs")
    if isinstance(given, list):
        return given
    return [names[k - 1] if k > 0 else model_inputs(spec)[0]["name"]]


def flatten_hwc(x):
    """actorps flattens activations in HWC order; PyTorch's images are NCHW."""
    return x.permute(0, 2, 3, 1).flatten(1) if x.dim() == 4 else x.flatten(1)


def last_axis(x):
    """actorps' last axis: channels (dim 1 of an NCHW image) or features."""
    return 1 if x.dim() == 4 else -1


class Embedding(nn.Module):
    """A lookup of ids [N, k] (negative: padding) combined by sum or mean over
    the valid ones, as actorps' embedding; sparse gradients."""

    def __init__(self, vocabulary, dim, combiner):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(vocabulary, dim).uniform_(-0.05, 0.05))
        self.mean = combiner == "mean"

    def forward(self, ids):
        valid = (ids >= 0).unsqueeze(-1).float()
        rows = nn.functional.embedding(ids.clamp(min=0), self.weight, sparse=True) * valid
        out = rows.sum(1)
        return out / valid.sum(1).clamp(min=1) if self.mean else out


class Graph(nn.Module):
    """An actorps model (the JSON `actorps export` writes as metadata
    "model") in PyTorch: flat examples x [N, input size] in, logits out,
    computing what actorps computes. `tensors` (name -> tensor in actorps'
    layouts) sets the weights; without it they start as PyTorch's defaults."""

    def __init__(self, spec, tensors=None):
        super().__init__()
        self.spec = spec
        self.inputs = model_inputs(spec)
        self.layers = spec["layers"]
        self.names = node_names(spec)
        width = {i["name"]: int(torch.tensor(i["shape"]).prod()) for i in self.inputs}
        self.sizes = [width[i["name"]] for i in self.inputs]
        self.modules_ = nn.ModuleDict()
        shapes = {i["name"]: list(i["shape"]) for i in self.inputs}
        for k, layer in enumerate(self.layers):
            sources = node_sources(spec, self.names, k)
            module = self.make(layer, [shapes[s] for s in sources], shapes, self.names[k])
            if module is not None:
                self.modules_[self.names[k]] = module
        if tensors is not None:
            self.load_actorps(tensors)

    def make(self, layer, shapes_in, shapes, name):
        """The node's module (None: parameterless), recording its output shape."""
        kind, shape = layer["type"], shapes_in[0]
        if kind == "conv2d":
            same = layer["padding"] == "same"
            h, w, c = shape
            k = layer["kernel"]
            shapes[name] = [h, w, layer["filters"]] if same else [h - k + 1, w - k + 1, layer["filters"]]
            return nn.Conv2d(c, layer["filters"], k, padding=k // 2 if same else 0)
        if kind == "maxpool2d":
            p = layer["pool"]
            shapes[name] = [shape[0] // p, shape[1] // p, shape[2]]
            return nn.MaxPool2d(p)
        if kind == "flatten":
            shapes[name] = [int(torch.tensor(shape).prod())]
            return None
        if kind == "dense":
            shapes[name] = [layer["units"]]
            return nn.Linear(shape[-1], layer["units"])
        if kind == "embedding":
            shapes[name] = [layer["dim"]]
            return Embedding(layer["vocabulary"], layer["dim"], layer["combiner"])
        if kind == "add":
            shapes[name] = shape
            return None
        if kind == "concat":
            shapes[name] = shape[:-1] + [sum(s[-1] for s in shapes_in)]
            return None
        raise ValueError(f"node type {kind} is not supported (supported: {', '.join(KINDS)})")

    def load_actorps(self, tensors):
        """Weights from actorps' layouts: conv kernels HWIO -> OIHW, dense
        [in, out] -> weight [out, in], embeddings as they are."""
        with torch.no_grad():
            for name, module in self.modules_.items():
                if isinstance(module, nn.Conv2d):
                    module.weight.copy_(tensors[f"{name}/kernel"].permute(3, 2, 0, 1))
                    module.bias.copy_(tensors[f"{name}/bias"])
                elif isinstance(module, nn.Linear):
                    module.weight.copy_(tensors[f"{name}/kernel"].t())
                    module.bias.copy_(tensors[f"{name}/bias"])
                elif isinstance(module, Embedding):
                    module.weight.copy_(tensors[f"{name}/embeddings"])

    def forward(self, x):
        values = {}
        for spec, part in zip(self.inputs, x.split(self.sizes, dim=1)):
            if spec["kind"] == "ids":
                values[spec["name"]] = part.long()
            elif len(spec["shape"]) == 3:
                values[spec["name"]] = part.reshape(-1, *spec["shape"]).permute(0, 3, 1, 2)
            else:
                values[spec["name"]] = part.reshape(-1, *spec["shape"])
        for k, layer in enumerate(self.layers):
            args = [values[s] for s in node_sources(self.spec, self.names, k)]
            kind, name = layer["type"], self.names[k]
            if kind == "flatten":
                y = flatten_hwc(args[0])
            elif kind == "add":
                y = sum(args[1:], args[0])
            elif kind == "concat":
                y = torch.cat(args, dim=last_axis(args[0]))
            else:
                y = self.modules_[name](args[0])
            values[name] = torch.relu(y) if layer.get("relu") else y
        return values[self.names[-1]]


def loss_function(spec):
    """The spec's loss of (logits, int labels)."""
    if spec.get("loss") == "sigmoid_bce":
        return lambda logits, y: nn.functional.binary_cross_entropy_with_logits(logits[:, 0], y.float())
    return nn.functional.cross_entropy


def load(path):
    tensors, metadata = read_safetensors(path)
    return Graph(json.loads(metadata["model"]), tensors).eval()


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
    model = load(args.model)
    images = read_idx(args.images).float().mul(args.scale)
    labels = read_idx(args.labels).long()
    with torch.no_grad():
        logits = model(images.reshape(len(labels), -1))
        loss = nn.functional.cross_entropy(logits, labels).item()
        accuracy = (logits.argmax(1) == labels).float().mean().item()
    print(f"loss {loss:.6f} accuracy {accuracy:.6f} examples {len(labels)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
