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


def size(shape):
    return int(torch.tensor(shape).prod())


def to_hwc(x):
    """An NCHW image as actorps holds it (NHWC); other tensors as they are."""
    return x.permute(0, 2, 3, 1) if x.dim() == 4 else x


def from_hwc(x):
    return x.permute(0, 3, 1, 2) if x.dim() == 4 else x


def last_axis(x):
    """actorps' last axis: channels (dim 1 of an NCHW image) or features."""
    return 1 if x.dim() == 4 else -1


def same_pads(n, k, stride):
    """TF's SAME at `stride`: (before, after), the smaller half first."""
    total = max(((n + stride - 1) // stride - 1) * stride + k - n, 0)
    return total // 2, total - total // 2


def window_pads(layer, shape, k, stride):
    """[top, left, bottom, right] of a conv or pool."""
    if layer.get("pads"):
        return list(layer["pads"])
    if layer.get("padding") == "same":
        (t, b), (l, r) = same_pads(shape[0], k, stride[0]), same_pads(shape[1], k, stride[1])
        return [t, l, b, r]
    return [0, 0, 0, 0]


def slid(n, pads, k, stride):
    return (n + pads - k) // stride + 1


class Conv(nn.Module):
    def __init__(self, layer, shape):
        super().__init__()
        k, self.stride = layer["kernel"], layer.get("strides", [1, 1])
        self.pads = window_pads(layer, shape, k, self.stride)
        self.conv = nn.Conv2d(shape[2], layer["filters"], k, stride=self.stride)
        t, l, b, r = self.pads
        self.shape = [slid(shape[0], t + b, k, self.stride[0]), slid(shape[1], l + r, k, self.stride[1]),
                      layer["filters"]]

    def forward(self, x):
        t, l, b, r = self.pads
        return self.conv(nn.functional.pad(x, (l, r, t, b)))


class Pool(nn.Module):
    """Max or average pooling; average pooling leaves padding out of the mean."""

    def __init__(self, layer, shape, average):
        super().__init__()
        self.k, self.average = layer["pool"], average
        self.s = layer.get("stride") or self.k
        self.pads = window_pads(layer, shape, self.k, [self.s, self.s])
        t, l, b, r = self.pads
        self.shape = [slid(shape[0], t + b, self.k, self.s), slid(shape[1], l + r, self.k, self.s), shape[2]]

    def forward(self, x):
        t, l, b, r = self.pads
        if not self.average:
            return nn.functional.max_pool2d(nn.functional.pad(x, (l, r, t, b), value=-float("inf")), self.k, self.s)
        ones = nn.functional.pad(torch.ones_like(x[:1, :1]), (l, r, t, b))
        total = nn.functional.avg_pool2d(nn.functional.pad(x, (l, r, t, b)), self.k, self.s)
        return total / nn.functional.avg_pool2d(ones, self.k, self.s)


class Embedding(nn.Module):
    """A lookup of ids [N, k] (negative: padding, rows of 0) combined by sum or
    mean over the valid ones, or kept ("none": [N, k, dim]); sparse gradients."""

    def __init__(self, layer, shape):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(layer["vocabulary"], layer["dim"]).uniform_(-0.05, 0.05))
        self.combiner = layer["combiner"]
        self.shape = [shape[-1], layer["dim"]] if self.combiner == "none" else [layer["dim"]]

    def forward(self, ids):
        valid = (ids >= 0).unsqueeze(-1).float()
        rows = nn.functional.embedding(ids.clamp(min=0), self.weight, sparse=True) * valid
        if self.combiner == "none":
            return rows
        out = rows.sum(1)
        return out / valid.sum(1).clamp(min=1) if self.combiner == "mean" else out


class Norm(nn.Module):
    """Batch or layer normalization over actorps' last axis (an image's channels)."""

    def __init__(self, layer, shape):
        super().__init__()
        c = shape[-1]
        if layer["type"] == "layernorm":
            self.norm = nn.LayerNorm(c, eps=layer["epsilon"])
        else:
            self.norm = nn.BatchNorm1d(c, eps=layer["epsilon"], momentum=layer["momentum"])
        self.shape = shape

    def forward(self, x):
        y = to_hwc(x)
        if isinstance(self.norm, nn.BatchNorm1d):
            return from_hwc(self.norm(y.reshape(-1, y.shape[-1])).reshape(y.shape))
        return from_hwc(self.norm(y))


def dot_interaction(args):
    """DLRM's: the dense vector (if given), then the pair dots of every
    vector, lower triangle in row order."""
    x = args[-1] if len(args) == 1 else torch.cat([args[0].unsqueeze(1), args[1]], 1)
    rows, cols = torch.tril_indices(x.shape[1], x.shape[1], offset=-1)
    pairs = torch.bmm(x, x.transpose(1, 2))[:, rows, cols]
    return pairs if len(args) == 1 else torch.cat([args[0], pairs], 1)


def fm(args):
    x = args[0]
    return 0.5 * (x.sum(1).pow(2) - x.pow(2).sum(1)).sum(1, keepdim=True)


def reshape(x, shape):
    y = to_hwc(x).reshape(x.shape[0], *shape)
    return from_hwc(y)


# Parameterless nodes: (output shape of the input shapes and layer, function of the inputs).
FUNCTIONS = {
    "flatten": (lambda s, l: [size(s[0])], lambda a, l: to_hwc(a[0]).flatten(1)),
    "add": (lambda s, l: s[0], lambda a, l: sum(a[1:], a[0])),
    "multiply": (lambda s, l: s[0], lambda a, l: torch.stack(a).prod(0)),
    "concat": (lambda s, l: s[0][:-1] + [sum(x[-1] for x in s)], lambda a, l: torch.cat(a, last_axis(a[0]))),
    "relu": (lambda s, l: s[0], lambda a, l: torch.relu(a[0])),
    "sigmoid": (lambda s, l: s[0], lambda a, l: torch.sigmoid(a[0])),
    "tanh": (lambda s, l: s[0], lambda a, l: torch.tanh(a[0])),
    "gelu": (lambda s, l: s[0], lambda a, l: nn.functional.gelu(a[0])),
    "softmax": (lambda s, l: s[0], lambda a, l: torch.softmax(a[0], last_axis(a[0]))),
    "dropout": (lambda s, l: s[0], lambda a, l: a[0]),  # inference form; Graph.forward drops in training
    "global_avgpool2d": (lambda s, l: [s[0][-1]], lambda a, l: a[0].mean((2, 3))),
    "reshape": (lambda s, l: reshaped(s[0], l["shape"]), lambda a, l: reshape(a[0], reshaped([], l["shape"]))),
    "dot_interaction": (lambda s, l: [interaction_width(s)], lambda a, l: dot_interaction(a)),
    "fm": (lambda s, l: [1], lambda a, l: fm(a)),
}


def reshaped(shape, target):
    """`target` with its -1 resolved against `shape` (left as is without one)."""
    if -1 not in target or not shape:
        return list(target)
    known = size([d for d in target if d != -1])
    return [size(shape) // known if d == -1 else d for d in target]


def interaction_width(shapes):
    fields = shapes[-1][0] + (len(shapes) == 2)
    return (shapes[0][0] if len(shapes) == 2 else 0) + fields * (fields - 1) // 2


def make_node(layer, shapes):
    """The node's module and its output shape (per example, actorps' layout)."""
    kind, shape = layer["type"], shapes[0]
    if kind == "conv2d":
        m = Conv(layer, shape)
    elif kind in ("maxpool2d", "avgpool2d"):
        m = Pool(layer, shape, kind == "avgpool2d")
    elif kind == "dense":
        m = nn.Linear(shape[-1], layer["units"])
        m.shape = [layer["units"]]
    elif kind == "embedding":
        m = Embedding(layer, shape)
    elif kind in ("layernorm", "batchnorm"):
        m = Norm(layer, shape)
    elif kind in FUNCTIONS:
        return None, FUNCTIONS[kind][0](shapes, layer)
    else:
        raise ValueError(f"node type {kind} is not supported (supported: conv2d, maxpool2d, avgpool2d, dense, "
                         f"embedding, layernorm, batchnorm, {', '.join(FUNCTIONS)})")
    return m, m.shape


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
        self.sizes = [size(i["shape"]) for i in self.inputs]
        self.nodes = nn.ModuleDict()
        shapes = {i["name"]: list(i["shape"]) for i in self.inputs}
        for k, layer in enumerate(self.layers):
            sources = node_sources(spec, self.names, k)
            module, shapes[self.names[k]] = make_node(layer, [shapes[s] for s in sources])
            if module is not None:
                self.nodes[self.names[k]] = module
        if tensors is not None:
            self.load_actorps(tensors)

    def load_actorps(self, tensors):
        """Weights from actorps' layouts: conv kernels HWIO -> OIHW, dense
        [in, out] -> weight [out, in], the rest as they are."""
        with torch.no_grad():
            for name, m in self.nodes.items():
                if isinstance(m, Conv):
                    m.conv.weight.copy_(tensors[f"{name}/kernel"].permute(3, 2, 0, 1))
                    m.conv.bias.copy_(tensors[f"{name}/bias"])
                elif isinstance(m, nn.Linear):
                    m.weight.copy_(tensors[f"{name}/kernel"].t())
                    m.bias.copy_(tensors[f"{name}/bias"])
                elif isinstance(m, Embedding):
                    m.weight.copy_(tensors[f"{name}/embeddings"])
                elif isinstance(m, Norm):
                    m.norm.weight.copy_(tensors[f"{name}/gamma"])
                    m.norm.bias.copy_(tensors[f"{name}/beta"])
                    if isinstance(m.norm, nn.BatchNorm1d):
                        m.norm.running_mean.copy_(tensors[f"{name}/moving_mean"])
                        m.norm.running_var.copy_(tensors[f"{name}/moving_variance"])

    def actorps_tensors(self):
        """The weights in actorps' layouts, by name: load_actorps' inverse."""
        out = {}
        with torch.no_grad():
            for name, m in self.nodes.items():
                if isinstance(m, Conv):
                    out[f"{name}/kernel"], out[f"{name}/bias"] = m.conv.weight.permute(2, 3, 1, 0), m.conv.bias
                elif isinstance(m, nn.Linear):
                    out[f"{name}/kernel"], out[f"{name}/bias"] = m.weight.t(), m.bias
                elif isinstance(m, Embedding):
                    out[f"{name}/embeddings"] = m.weight
                elif isinstance(m, Norm):
                    out[f"{name}/gamma"], out[f"{name}/beta"] = m.norm.weight, m.norm.bias
                    if isinstance(m.norm, nn.BatchNorm1d):
                        out[f"{name}/moving_mean"] = m.norm.running_mean
                        out[f"{name}/moving_variance"] = m.norm.running_var
        return {name: t.detach().contiguous() for name, t in out.items()}

    def forward(self, x):
        values = {}
        for spec, part in zip(self.inputs, x.split(self.sizes, dim=1)):
            if spec["kind"] == "ids":
                values[spec["name"]] = part.long()
            else:
                values[spec["name"]] = from_hwc(part.reshape(-1, *spec["shape"]))
        for k, layer in enumerate(self.layers):
            args = [values[s] for s in node_sources(self.spec, self.names, k)]
            name = self.names[k]
            if name in self.nodes:
                y = self.nodes[name](args[0])
            elif layer["type"] == "dropout":
                y = nn.functional.dropout(args[0], layer["rate"], self.training)
            else:
                y = FUNCTIONS[layer["type"]][1](args, layer)
            values[name] = torch.relu(y) if layer.get("relu") else y
        return values[self.names[-1]]


def loss_function(spec):
    """The spec's loss of (logits, int labels)."""
    if spec.get("loss") == "sigmoid_bce":
        return lambda logits, y: nn.functional.binary_cross_entropy_with_logits(logits[:, 0], y.float())
    if spec.get("loss") == "mse":
        return lambda logits, y: nn.functional.mse_loss(logits[:, 0], y.float())
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


def evaluate_idx(description, logits_of):
    """A tool's main: `logits_of(model path, x [N, input size])` on IDX files
    (the MNIST format), printing `loss .. accuracy .. examples ..` (one
    logit: sigmoid BCE on labels 0/1; else softmax cross-entropy)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("model")
    parser.add_argument("--images", required=True)
    parser.add_argument("--labels", required=True)
    parser.add_argument("--scale", type=float, default=1.0, help="x *= scale (the job's map op)")
    args = parser.parse_args()
    images = read_idx(args.images).float().mul(args.scale)
    labels = read_idx(args.labels).long()
    with torch.no_grad():
        logits = logits_of(args.model, images.reshape(len(labels), -1))
        if logits.shape[1] == 1:
            loss = nn.functional.binary_cross_entropy_with_logits(logits[:, 0], labels.float()).item()
            accuracy = ((logits[:, 0] > 0).long() == labels).float().mean().item()
        else:
            loss = nn.functional.cross_entropy(logits, labels).item()
            accuracy = (logits.argmax(1) == labels).float().mean().item()
    print(f"loss {loss:.6f} accuracy {accuracy:.6f} examples {len(labels)}")
    return 0


def main():
    return evaluate_idx(__doc__.split("\n")[0], lambda path, x: load(path)(x))


if __name__ == "__main__":
    sys.exit(main())
