#!/usr/bin/python3
"""Runs an ONNX model (`actorps export --format onnx`) with PyTorch ops.

A small interpreter over the ONNX ops actorps' export emits, so the file is
checked by an implementation that shares no code with actorps.
As a module: `run(model, inputs)` gives the logits of a model (a path or an
onnx.ModelProto) on `inputs`, by input name in the model's shapes (images
NCHW, ids int64); `from_rows(model, x)` makes them from actorps' flat
examples x [N, input size] (every input's columns, images HWC, ids as floats).
As a program: evaluates it on IDX files (the MNIST format) and prints
`loss <mean loss> accuracy <fraction> examples <n>`:

    tools/onnx_torch.py model.onnx --images t10k-images-idx3-ubyte \
        --labels t10k-labels-idx1-ubyte --scale 0.00392156862745098

Needs python3-onnx (onnx.load, numpy_helper) and python3-torch."""
import functools
import math
import sys

import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper

from torch_model import evaluate_idx

DTYPES = {onnx.TensorProto.FLOAT: torch.float32, onnx.TensorProto.INT64: torch.int64,
          onnx.TensorProto.BOOL: torch.bool}


def spatial_padding(pads):
    """ONNX pads [top, left, bottom, right] as F.pad's (left, right, top, bottom)."""
    top, left, bottom, right = pads
    return (left, right, top, bottom)


def conv(x, w, b=None, kernel_shape=None, pads=(0, 0, 0, 0), strides=(1, 1), dilations=(1, 1), group=1):
    x = F.pad(x, spatial_padding(pads))
    return F.conv2d(x, w, b, tuple(strides), 0, tuple(dilations), group)


def max_pool(x, kernel_shape, strides=None, pads=(0, 0, 0, 0)):
    x = F.pad(x, spatial_padding(pads), value=-math.inf)
    return F.max_pool2d(x, tuple(kernel_shape), tuple(strides or kernel_shape))


def gemm(a, b, c=None, alpha=1.0, beta=1.0, transA=0, transB=0):
    y = alpha * (a.t() if transA else a) @ (b.t() if transB else b)
    return y if c is None else y + beta * c


def reshape(x, shape, allowzero=0):
    dims = [x.shape[i] if d == 0 and not allowzero else d for i, d in enumerate(shape.tolist())]
    return x.reshape(dims)


def unsqueeze(x, axes):
    for axis in sorted(a % (x.dim() + len(axes)) for a in axes.tolist()):
        x = x.unsqueeze(axis)
    return x


def reduce_sum(x, axes=None, keepdims=1, noop_with_empty_axes=0):
    if axes is None or axes.numel() == 0:
        return x if noop_with_empty_axes else x.sum().reshape([1] * x.dim() if keepdims else [])
    return x.sum(dim=tuple(axes.tolist()), keepdim=bool(keepdims))


def gather(data, indices, axis=0):
    taken = data.index_select(axis, indices.reshape(-1))
    return taken.reshape(data.shape[:axis] + indices.shape + data.shape[axis + 1:])


def average_pool(x, kernel_shape, strides=(1, 1), pads=(0, 0, 0, 0), count_include_pad=0, ceil_mode=0):
    """Padding zeros, counted in the mean only with count_include_pad."""
    window, stride, padding = tuple(kernel_shape), tuple(strides), spatial_padding(pads)
    total = F.avg_pool2d(F.pad(x, padding), window, stride)
    if count_include_pad:
        return total
    return total / F.avg_pool2d(F.pad(torch.ones_like(x[:, :1]), padding), window, stride)


def layer_norm(x, scale, bias=None, axis=-1, epsilon=1e-5, stash_type=1):
    return F.layer_norm(x, x.shape[axis % x.dim():], scale, bias, epsilon)


def batch_norm(x, scale, bias, mean, var, epsilon=1e-5, momentum=0.9, training_mode=0):
    return F.batch_norm(x, mean, var, scale, bias, bool(training_mode), 1 - momentum, epsilon)


OPS = {
    "Conv": conv,
    "MaxPool": max_pool,
    "Relu": torch.relu,
    "Flatten": lambda x, axis=1: x.reshape(math.prod(x.shape[:axis]), -1),
    "Gemm": gemm,
    "Transpose": lambda x, perm: x.permute(*perm),
    "Reshape": reshape,
    "Identity": lambda x: x,
    "Sum": lambda *xs: functools.reduce(torch.add, xs),
    "Concat": lambda *xs, axis: torch.cat(xs, axis),
    "Gather": gather,
    "GreaterOrEqual": torch.ge,
    "Where": torch.where,
    "Cast": lambda x, to: x.to(DTYPES[to]),
    "Unsqueeze": unsqueeze,
    "Mul": torch.mul,
    "Div": torch.div,
    "Max": lambda *xs: functools.reduce(torch.maximum, xs),
    "ReduceSum": reduce_sum,
    "Add": torch.add,
    "Sub": torch.sub,
    "MatMul": torch.matmul,
    "Sigmoid": torch.sigmoid,
    "Tanh": torch.tanh,
    "Erf": torch.erf,
    "Softmax": lambda x, axis=-1: torch.softmax(x, axis),
    "AveragePool": average_pool,
    "GlobalAveragePool": lambda x: x.mean(dim=(2, 3), keepdim=True),
    "LayerNormalization": layer_norm,
    "BatchNormalization": batch_norm,
}


def as_model(model):
    return onnx.load(model) if isinstance(model, str) else model


def graph_inputs(model):
    """The inputs a caller feeds (not initializers): [(name, elem type, dims after the batch)]."""
    known = {i.name for i in model.graph.initializer}
    return [(i.name, i.type.tensor_type.elem_type, [d.dim_value for d in i.type.tensor_type.shape.dim[1:]])
            for i in model.graph.input if i.name not in known]


def from_rows(model, x):
    """actorps' flat examples x [N, input size] as the model's inputs."""
    x, inputs, offset = torch.as_tensor(x), {}, 0
    for name, elem_type, dims in graph_inputs(as_model(model)):
        size = math.prod(dims)
        part = x[:, offset:offset + size]
        offset += size
        if len(dims) == 3:  # NCHW from our HWC columns
            c, h, w = dims
            inputs[name] = part.reshape(-1, h, w, c).permute(0, 3, 1, 2)
        else:
            inputs[name] = part.reshape(-1, *dims)
        inputs[name] = inputs[name].to(DTYPES[elem_type])
    return inputs


def run(model, inputs):
    """The model's first output (the logits) on `inputs` (by name)."""
    model = as_model(model)
    values = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy()) for t in model.graph.initializer}
    values.update({name: torch.as_tensor(v) for name, v in inputs.items()})
    for node in model.graph.node:
        if node.op_type not in OPS:
            raise ValueError(f"node {node.name}: op {node.op_type} is not supported (supported: {', '.join(OPS)})")
        args = [values[i] if i else None for i in node.input]
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        values[node.output[0]] = OPS[node.op_type](*args, **attrs)
    return values[model.graph.output[0].name]


def logits_of(path, x):
    model = onnx.load(path)
    return run(model, from_rows(model, x))


def main():
    return evaluate_idx(__doc__.split("\n")[0], logits_of)


if __name__ == "__main__":
    sys.exit(main())
