"""The symbolic graph behind ``actorps.layers``: Input tensors, the Layer
base class (calling a layer records its node), Sequential, and the
rendering of the graph from inputs to logits as the [model] table the C++
loader reads (model_config, config_toml, to_model_toml). Argument checks
shared by the layers live here too. The public names are
``actorps.layers``'s; this module needs nothing but the standard library."""

import itertools
import math
import numbers

from . import _toml

_order = itertools.count()  # the order nodes were made in: the layers' order in the table

_LOSSES = {
    "softmax_xent": "softmax_xent", "sparse_categorical_crossentropy": "softmax_xent",
    "sigmoid_bce": "sigmoid_bce", "binary_crossentropy": "sigmoid_bce",
    "mse": "mse", "mean_squared_error": "mse",
}
_KINDS = {None: "float", "float32": "float", "float": "float", "ids": "ids", "int32": "ids", "int64": "ids",
          "ids64": "ids64"}


# ---- argument checks ---------------------------------------------------------
def _where(owner, arg):
    return f"{owner}: {arg}" if owner else arg


def _int(owner, arg, v):
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise ValueError(f"{_where(owner, arg)}: expected an integer, got {v!r}")
    return int(v)


def _number(owner, arg, v):
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(float(v)):
        raise ValueError(f"{_where(owner, arg)}: expected a number, got {v!r}")
    return float(v)


def _pair(owner, arg, v, what="a square window"):
    """An int, or an (h, w) pair of one int (the table has one size)."""
    if isinstance(v, (tuple, list)):
        if len(v) != 2 or v[0] != v[1]:
            raise ValueError(f"{_where(owner, arg)}: expected an integer or (n, n) ({what}), got {v!r}")
        v = v[0]
    return _int(owner, arg, v)


def _ints(owner, arg, v, lengths):
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        v = (v,)
    if not isinstance(v, (tuple, list)) or len(v) not in lengths:
        n = " or ".join(str(x) for x in lengths)
        raise ValueError(f"{_where(owner, arg)}: expected {n} integers, got {v!r}")
    return [_int(owner, f"{arg}[{i}]", x) for i, x in enumerate(v)]


def _keras_defaults(owner, kwargs, defaults):
    """Keras arguments the table has no key for: accepted at Keras's default
    (`defaults`: name -> allowed values), else ValueError naming them."""
    for k, v in kwargs.items():
        v = tuple(v) if isinstance(v, list) else v
        if k in defaults and any(v is d or (d is not None and v == d) for d in defaults[k]):
            continue
        if k in defaults:
            raise ValueError(f"{owner}: {k}={v!r} is not supported (actorps's model format has no key for it; "
                             f"only {defaults[k][0]!r})")
        raise ValueError(f"{owner}: unknown argument {k!r} (actorps's model format has no key for it)")


def _name(owner, name):
    if name is not None and (not isinstance(name, str) or not name):
        raise ValueError(f"{_where(owner, 'name')}: expected a non-empty string, got {name!r}")
    return name


# ---- the graph -----------------------------------------------------------------
class _Node:
    """One [[model.inputs]] (type None) or [[model.layers]] table."""

    def __init__(self, type, name, keys, inputs=(), kind=None, shape=None):
        self.id = next(_order)
        self.type, self.name, self.keys = type, name, dict(keys)
        self.inputs = list(inputs)  # _Node
        self.kind = kind  # inputs: "float", "ids", "ids64"; layers: "float"
        self.shape = shape  # per example, or None where not worked out here


class KerasTensor:
    """A symbolic tensor: an Input, or a layer's output. `shape` is Keras's
    ((None,) + per example; a size this module does not work out is None),
    `dtype` "float32" or "int64" (ids)."""

    def __init__(self, node):
        self._node = node

    @property
    def shape(self) -> tuple | None:
        """Keras's shape: (None,) + the shape per example, or None where not worked out here."""
        s = self._node.shape
        return (None,) + tuple(s) if s is not None else None

    @property
    def dtype(self) -> str:
        """"float32", or "int64" for ids."""
        return "float32" if self._node.kind == "float" else "int64"

    @property
    def name(self) -> str | None:
        """The name given to its Input or layer (None: the table's default, given when the model is written)."""
        return self._node.name

    def __repr__(self):
        what = f"Input {self.name!r}" if self._node.type is None else f"{self._node.type} {self.name or ''}".strip()
        return f"<KerasTensor shape={self.shape} dtype={self.dtype} ({what})>"


def Input(shape=None, name: str | None = None, dtype="float32", **kwargs) -> KerasTensor:
    """A model input: `shape` per example (1 to 3 sizes: [13], [28, 28, 1]),
    `dtype` "float32" (kind "float") or "int64"/"int32"/"ids" (kind "ids",
    read by an Embedding; one size, the ids per example) or "ids64" (64-bit
    ids, read by an Embedding(dynamic=True)). Inputs take their columns of
    each example's row in the order the model lists them."""
    _keras_defaults("Input", kwargs, {"batch_size": (None,), "batch_shape": (None,), "sparse": (None, False),
                                      "ragged": (None, False), "tensor": (None,)})
    if shape is None:
        raise ValueError("Input: shape: give the shape of one example, e.g. shape=(13,) or (28, 28, 1)")
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)) or not 1 <= len(shape) <= 3 or any(s is None for s in shape):
        raise ValueError(f"Input: shape: expected 1 to 3 known sizes per example, e.g. (13,) or (28, 28, 1), "
                         f"got {shape!r}")
    shape = [_int("Input", f"shape[{i}]", s) for i, s in enumerate(shape)]
    key = dtype.lower() if isinstance(dtype, str) else getattr(dtype, "name", dtype)
    if key not in _KINDS:
        raise ValueError(f"Input: dtype: {dtype!r} is not supported (expected 'float32', 'int64' (ids) or 'ids64')")
    return KerasTensor(_Node(None, _name("Input", name), {}, kind=_KINDS[key], shape=shape))


def _tensors(owner, inputs, count):
    """The layer's inputs as KerasTensors (`count`: (min, max))."""
    many = isinstance(inputs, (list, tuple))
    xs = list(inputs) if many else [inputs]
    for i, x in enumerate(xs):
        if not isinstance(x, KerasTensor):
            raise ValueError(f"{owner}: inputs{f'[{i}]' if many else ''}: expected a tensor of layers.Input or a "
                             f"layer's output, got {type(x).__name__}")
    lo, hi = count
    if not lo <= len(xs) <= hi:
        want = str(lo) if lo == hi else f"{lo} to {hi}"
        raise ValueError(f"{owner}: takes {want} input{'s' if hi > 1 else ''}, got {len(xs)}")
    return xs


class Layer:
    """A layer: calling it on tensors records its node(s) and returns its output."""

    _type = None  # the table's type
    _count = (1, 1)  # inputs it takes
    _keras = {}  # Keras arguments without a key: their accepted defaults

    def __init__(self, name: str | None = None, **kwargs):
        owner = type(self).__name__
        self.input_shape = kwargs.pop("input_shape", None)  # Keras: a Sequential's first layer may say it
        _keras_defaults(owner, kwargs, dict({"dtype": (None, "float32"), "trainable": (True,)}, **self._keras))
        self.name = _name(owner, name)
        self._called = False
        self._activation = (None, None)

    def _keys(self, xs):
        """The table's keys of this node (besides type, name and inputs)."""
        return {}

    def _shape(self, shapes):
        """Its output's shape per example from its inputs' (None when unknown)."""
        return None

    def _kind(self, xs):
        for x in xs:
            if x._node.kind != "float":
                which = f" {x.name!r}" if x.name else ""
                raise ValueError(f"{self._owner()}: cannot read ids Input{which} (only an Embedding reads ids)")

    def _owner(self):
        return f"{type(self).__name__}" + (f" {self.name!r}" if self.name else "")

    def __call__(self, inputs) -> KerasTensor:
        """Records this layer's node(s) reading `inputs` (a tensor, or a list for a merge); its output."""
        owner = self._owner()
        if self._called:
            raise ValueError(f"{owner}: called twice: actorps's model format has no shared layers "
                             "(make one layer per call)")
        xs = _tensors(owner, inputs, self._count)
        self._kind(xs)
        keys = self._keys(xs)
        inline, after = self._activation
        if inline:
            keys["activation"] = inline
        shapes = [x._node.shape for x in xs]
        try:
            shape = self._shape(shapes) if all(s is not None for s in shapes) else None
        except (IndexError, ZeroDivisionError, TypeError):
            shape = None  # the loader says what does not fit
        node = _Node(self._type, self.name, keys, [x._node for x in xs], kind="float", shape=shape)
        self._called = True
        if after:
            node = _Node(after, f"{self.name}_{after}" if self.name else None, {}, [node], kind="float",
                         shape=shape)
        return KerasTensor(node)


# ---- the [model] table ----------------------------------------------------------------
def _loss(loss):
    """The table's loss for a Keras name or loss object ("sparse_categorical_crossentropy" -> "softmax_xent")."""
    name = loss if isinstance(loss, str) else getattr(loss, "name", type(loss).__name__)
    key = str(name).lower()
    if key not in _LOSSES:
        raise ValueError(f"loss: {loss!r} is not supported (expected one of {', '.join(sorted(_LOSSES))}; the "
                         "loss reads the last layer's logits, as Keras's from_logits=True)")
    return _LOSSES[key]


def _as_list(arg, v):
    if isinstance(v, dict):
        v = list(v.values())
    many = isinstance(v, (list, tuple))
    xs = list(v) if many else [v]
    for i, x in enumerate(xs):
        if not isinstance(x, KerasTensor):
            raise ValueError(f"{arg}{f'[{i}]' if many else ''}: expected a tensor of layers.Input or a layer's "
                             f"output, got {type(x).__name__}")
    return xs


def _endpoints(inputs, outputs):
    """The Input nodes (checked: Inputs, each once) and the one output node."""
    ins = _as_list("inputs", inputs)
    outs = _as_list("outputs", outputs)
    if not ins:
        raise ValueError("inputs: give the model's Input tensors")
    if len(outs) != 1:
        raise ValueError(f"outputs: a model has one output (the logits the loss reads), got {len(outs)}")
    for i, x in enumerate(ins):
        if x._node.type is not None:
            raise ValueError(f"inputs[{i}]: expected a tensor of layers.Input, got a layer's output")
    if len({id(x._node) for x in ins}) != len(ins):
        raise ValueError("inputs: an Input is listed twice")
    if outs[0]._node.type is None:
        raise ValueError("outputs: the logits must come from a layer, not straight from an Input")
    return [x._node for x in ins], outs[0]._node


def _layers_read(ins, out):
    """Every layer node `out` reads, in the order made (which reads before
    it is read); ValueError where one reads an Input `ins` does not list."""
    seen, stack, nodes = set(), [out], []
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if n.type is not None:
            nodes.append(n)
        stack.extend(n.inputs)
    nodes.sort(key=lambda n: n.id)
    listed = {id(n) for n in ins}
    for n in nodes:
        for src in n.inputs:
            if src.type is None and id(src) not in listed:
                raise ValueError(f"inputs: the outputs read Input {src.name or '(unnamed)'!r}, which inputs does "
                                 "not list")
    return nodes


def _names(ins, nodes):
    """id(node) -> its name: the given one, else the loader's default
    (x / input_<i>, <type>_<k>); ValueError where two nodes share one."""
    names, taken, counts = {}, set(), {}
    for i, n in enumerate(ins):
        names[id(n)] = n.name or ("x" if len(ins) == 1 else f"input_{i}")
    for n in nodes:
        k = counts.get(n.type, 0)
        counts[n.type] = k + 1
        names[id(n)] = n.name or f"{n.type}_{k}"
    for n in ins + nodes:
        name = names[id(n)]
        if name in taken:
            raise ValueError(f"name: {name!r} names two nodes of the model (an Input or layer's name, or the "
                             "default <type>_<k> of an unnamed one): give them different names")
        taken.add(name)
    return names


def model_config(inputs, outputs, loss="softmax_xent") -> dict:
    """The [model] table of the graph from `inputs` (an Input, or a list of
    them: their columns' order in each example's row) to `outputs` (the
    one tensor of logits), as the dict ``actorps.Model(config)`` takes:
    {"loss", "inputs": [{name, shape, kind}], "layers": [{name, type,
    inputs, ...}]}. Layers come in the order they were called."""
    ins, out = _endpoints(inputs, outputs)
    nodes = _layers_read(ins, out)
    names = _names(ins, nodes)
    config = {"loss": _loss(loss), "inputs": [], "layers": []}
    for n in ins:
        entry = {"name": names[id(n)], "shape": list(n.shape)}
        if n.kind != "float":
            entry["kind"] = n.kind
        config["inputs"].append(entry)
    for n in nodes:
        entry = {"name": names[id(n)], "type": n.type, "inputs": [names[id(s)] for s in n.inputs]}
        entry.update(n.keys)
        config["layers"].append(entry)
    return config


def config_toml(config: dict) -> str:
    """A [model] table's dict (model_config's) as TOML text."""
    return _toml.table("model", config)


def to_model_toml(inputs, outputs, loss="softmax_xent") -> str:
    """model_config's table as TOML text: a [model] section for a job file."""
    return config_toml(model_config(inputs, outputs, loss))


class Sequential:
    """Keras's Sequential: layers each reading the one before, from one
    Input: ``Sequential([...], input_shape=(28, 28, 1))``, or an Input as
    the first item, or a first layer given ``input_shape=``. `inputs` and
    `outputs` are its tensors; `model_config(loss)` / `to_model_toml(loss)`
    its table."""

    def __init__(self, layers=None, input_shape=None, dtype="float32", name: str | None = None):
        self.name = name
        self.inputs = None
        self.outputs = None
        self._layers = []
        if input_shape is not None:
            self._start(Input(input_shape, dtype=dtype))
        for layer in layers or []:
            self.add(layer)

    def _start(self, x):
        self.inputs = [x]
        self.outputs = [x]

    def add(self, layer) -> None:
        """Appends a layer (or, first, an Input)."""
        if isinstance(layer, KerasTensor):
            if self.inputs is not None or layer._node.type is not None:
                raise ValueError("Sequential: an Input can only come first (one input: use the functional API "
                                 "for more)")
            self._start(layer)
            return
        if not isinstance(layer, Layer):
            raise ValueError(f"Sequential: expected a layer, got {type(layer).__name__}")
        if self.inputs is None:
            if layer.input_shape is None:
                raise ValueError("Sequential: input_shape: give the shape of one example (Sequential(..., "
                                 "input_shape=(28, 28, 1)), an Input first, or input_shape= on the first layer)")
            self._start(Input(layer.input_shape))
        self.outputs = [layer(self.outputs[0])]
        self._layers.append(layer)

    @property
    def layers(self) -> list:
        """Its layers, in order (the Input not among them)."""
        return list(self._layers)

    def model_config(self, loss="softmax_xent") -> dict:
        """Its [model] table as a dict (layers.model_config's)."""
        if not self._layers:
            raise ValueError("Sequential: no layers")
        return model_config(self.inputs, self.outputs, loss)

    def to_model_toml(self, loss="softmax_xent") -> str:
        """Its [model] table as TOML text."""
        return config_toml(self.model_config(loss))
