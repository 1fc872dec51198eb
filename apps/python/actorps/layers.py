"""``tf.keras.layers`` for actorps models: Keras's functional API (and a
``Sequential`` helper) that records the graph of a TOML ``[model]`` table
(config/README.md; config/model_config.cpp reads it).

>>> from actorps import layers
>>> x = layers.Input(shape=(28, 28, 1))
>>> h = layers.Conv2D(32, 3, activation="relu")(x)
>>> h = layers.MaxPooling2D(2)(h)
>>> h = layers.Flatten()(h)
>>> h = layers.Dense(64, activation="relu")(h)
>>> logits = layers.Dense(10)(h)
>>> config = layers.model_config(x, logits, loss="softmax_xent")  # the [model] table as a dict
>>> text = layers.to_model_toml(x, logits, loss="softmax_xent")   # ... as TOML text

``actorps.Model(config)`` takes the dict. Every layer becomes one
``[[model.layers]]`` table (two where Keras's ``activation`` is one the
table has no key for: sigmoid, tanh, gelu or softmax follow as their own
node), in the order the layers were called, each with a ``name`` (the
one given, else the loader's default ``<type>_<k>``: the k-th node of its
type from 0, ``dense_0``, so the variables are ``dense_0/kernel`` as for a
TOML file that names nothing) and its ``inputs``. The last layer gives
the logits (the loss reads logits: Keras's ``from_logits=True``).

Only what the TOML format has is accepted: a Keras argument it has no key
for raises ValueError naming the argument (Keras's defaults, such as
``use_bias=True``, are accepted). Values are range-checked by the C++
loader when the job is parsed, so a bad one (``Dense(0)``) raises
ValueError there with file:line:column and the key
(``model.layers[3].units``).

Defaults are Keras's where Keras has the layer (``LayerNormalization``'s
epsilon 1e-3; ``BatchNormalization``'s momentum 0.99, written as the
table's PyTorch-style momentum 1 - 0.99 = 0.01, and epsilon 1e-3), and the
table's where it is actorps's own (``Embedding``'s ``combiner = "mean"``:
TF's embedding columns'; ``combiner="none"`` gives Keras's
``[ids, output_dim]``).

This module needs nothing but the standard library.
"""

import itertools
import json
import math
import numbers

__all__ = [
    "Activation", "Add", "AveragePooling2D", "BatchNormalization", "Concatenate", "Conv2D", "Dense",
    "DotInteraction", "Dropout", "Embedding", "FM", "Flatten", "GELU", "GlobalAveragePooling2D", "Input",
    "KerasTensor", "Layer", "LayerNormalization", "MaxPooling2D", "Multiply", "ReLU", "Reshape", "Sequential",
    "Softmax", "add", "concatenate", "config_toml", "model_config", "multiply", "to_model_toml",
]

_order = itertools.count()  # the order nodes were made in: the layers' order in the table

_LOSSES = {
    "softmax_xent": "softmax_xent", "sparse_categorical_crossentropy": "softmax_xent",
    "sigmoid_bce": "sigmoid_bce", "binary_crossentropy": "sigmoid_bce",
    "mse": "mse", "mean_squared_error": "mse",
}
# Activations as a key of the layer's own table ("relu"), as a node after it, or none.
_INLINE = ("relu",)
_NODES = ("sigmoid", "tanh", "gelu", "softmax")
_NONE = (None, "linear", "none")
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


def _activation(owner, v):
    """(the table's `activation` value or None, the node after it or None)."""
    if isinstance(v, str):
        v = v.lower()
    if v in _NONE:
        return None, None
    if v in _INLINE:
        return v, None
    if v in _NODES:
        return None, v
    raise ValueError(f"{_where(owner, 'activation')}: {v!r} is not supported "
                     f"(expected one of None, 'linear', {', '.join(repr(a) for a in _INLINE + _NODES)})")


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
    def shape(self):
        s = self._node.shape
        return (None,) + tuple(s) if s is not None else None

    @property
    def dtype(self):
        return "float32" if self._node.kind == "float" else "int64"

    @property
    def name(self):
        """The name given to its Input or layer (None: the table's default, given when the model is written)."""
        return self._node.name

    def __repr__(self):
        what = f"Input {self.name!r}" if self._node.type is None else f"{self._node.type} {self.name or ''}".strip()
        return f"<KerasTensor shape={self.shape} dtype={self.dtype} ({what})>"


def Input(shape=None, name=None, dtype="float32", **kwargs):
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

    def __init__(self, name=None, **kwargs):
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

    def __call__(self, inputs):
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


def _same_pads(size, k, stride):
    total = max((-(-size // stride) - 1) * stride + k - size, 0)
    return total // 2, total - total // 2


def _sliding(size, pads, k, stride):
    return (size + pads - k) // stride + 1 if size + pads >= k else 0


# ---- spatial --------------------------------------------------------------------
class Conv2D(Layer):
    """conv2d: `filters`, `kernel_size` (n or (n, n)), `strides` (n or
    (h, w)), `padding` "valid", "same" (TF's SAME at any stride) or
    [top, left, bottom, right] (the table's pads), `activation`. NHWC
    only; a kernel is [n, n, in, filters]."""

    _type = "conv2d"
    _keras = {"data_format": (None, "channels_last"), "dilation_rate": (1, (1, 1)), "groups": (1,),
              "use_bias": (True,), "kernel_initializer": ("glorot_uniform",), "bias_initializer": ("zeros",),
              "kernel_regularizer": (None,), "bias_regularizer": (None,), "activity_regularizer": (None,),
              "kernel_constraint": (None,), "bias_constraint": (None,)}

    def __init__(self, filters, kernel_size, strides=1, padding="valid", activation=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        o = type(self).__name__
        self.filters = _int(o, "filters", filters)
        self.kernel_size = _pair(o, "kernel_size", kernel_size)
        s = _ints(o, "strides", strides, (1, 2))
        self.strides = [s[0], s[0]] if len(s) == 1 else s
        if isinstance(padding, str) and padding.lower() in ("valid", "same"):
            self.padding, self.pads = padding.lower(), None
        elif isinstance(padding, (list, tuple)):
            self.padding, self.pads = None, _ints(o, "padding", padding, (4,))
        else:
            raise ValueError(f"{o}: padding: expected 'valid', 'same' or [top, left, bottom, right], got {padding!r}")
        self._activation = _activation(o, activation)

    def _keys(self, xs):
        keys = {"filters": self.filters, "kernel": self.kernel_size}
        h, w = self.strides
        if (h, w) != (1, 1):
            keys.update({"stride": h} if h == w else {"strides": [h, w]})
        if self.pads is not None:
            keys["pads"] = self.pads
        else:
            keys["padding"] = self.padding
        return keys

    def _shape(self, shapes):
        (s,) = shapes
        if len(s) != 3:
            return None
        k, (sh, sw) = self.kernel_size, self.strides
        if self.pads is not None:
            pads = self.pads
        elif self.padding == "same":
            (t, b), (l, r) = _same_pads(s[0], k, sh), _same_pads(s[1], k, sw)
            pads = [t, l, b, r]
        else:
            pads = [0, 0, 0, 0]
        return [_sliding(s[0], pads[0] + pads[2], k, sh), _sliding(s[1], pads[1] + pads[3], k, sw), self.filters]


class _Pooling2D(Layer):
    _keras = {"data_format": (None, "channels_last")}

    def __init__(self, pool_size=2, strides=None, padding="valid", name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        o = type(self).__name__
        self.pool_size = _pair(o, "pool_size", pool_size)
        self.strides = None if strides is None else _pair(o, "strides", strides, "one stride for h and w")
        if not isinstance(padding, str) or padding.lower() not in ("valid", "same"):
            raise ValueError(f"{o}: padding: expected 'valid' or 'same', got {padding!r}")
        self.padding = padding.lower()

    def _pads(self, s):
        if self.padding == "valid":
            return [0, 0, 0, 0]
        if s is None or len(s) != 3:
            raise ValueError(f"{self._owner()}: padding='same' needs its input's [h, w, c] known (pads = [top, "
                             "left, bottom, right] come from it)")
        stride = self.strides or self.pool_size
        (t, b), (l, r) = _same_pads(s[0], self.pool_size, stride), _same_pads(s[1], self.pool_size, stride)
        return [t, l, b, r]

    def _keys(self, xs):
        keys = {"pool": self.pool_size}
        if self.strides is not None and self.strides != self.pool_size:
            keys["stride"] = self.strides
        pads = self._pads(xs[0]._node.shape)
        if any(pads):
            keys["pads"] = pads
        return keys

    def _shape(self, shapes):
        (s,) = shapes
        if len(s) != 3:
            return None
        p, stride, pads = self.pool_size, self.strides or self.pool_size, self._pads(s)
        return [_sliding(s[0], pads[0] + pads[2], p, stride), _sliding(s[1], pads[1] + pads[3], p, stride), s[2]]


class MaxPooling2D(_Pooling2D):
    """maxpool2d: `pool_size` (n or (n, n)), `strides` (default: the
    window), `padding` "valid" or "same" (TF's: pads from the input's size)."""

    _type = "maxpool2d"


class AveragePooling2D(_Pooling2D):
    """avgpool2d: as MaxPooling2D; padding is left out of the mean (as Keras)."""

    _type = "avgpool2d"


class GlobalAveragePooling2D(Layer):
    """global_avgpool2d: [h, w, c] -> [c]."""

    _type = "global_avgpool2d"
    _keras = {"data_format": (None, "channels_last"), "keepdims": (False,)}

    def _shape(self, shapes):
        return [shapes[0][-1]] if len(shapes[0]) == 3 else None


class Flatten(Layer):
    """flatten: [...] -> [size]."""

    _type = "flatten"
    _keras = {"data_format": (None, "channels_last")}

    def _shape(self, shapes):
        return [math.prod(shapes[0])]


class Reshape(Layer):
    """reshape: `target_shape` per example, 1 to 3 sizes, one of them may be -1."""

    _type = "reshape"

    def __init__(self, target_shape, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.target_shape = _ints(type(self).__name__, "target_shape", target_shape, (1, 2, 3))

    def _keys(self, xs):
        return {"shape": self.target_shape}

    def _shape(self, shapes):
        t, size = list(self.target_shape), math.prod(shapes[0])
        if t.count(-1) == 1:
            rest = -math.prod(t)
            t[t.index(-1)] = size // rest if rest > 0 and size % rest == 0 else None
        return t if None not in t else None


# ---- dense and embeddings --------------------------------------------------------
class Dense(Layer):
    """dense: [k] -> [units] (a flat input: Flatten an image first), `activation`."""

    _type = "dense"
    _keras = {"use_bias": (True,), "kernel_initializer": ("glorot_uniform",), "bias_initializer": ("zeros",),
              "kernel_regularizer": (None,), "bias_regularizer": (None,), "activity_regularizer": (None,),
              "kernel_constraint": (None,), "bias_constraint": (None,), "lora_rank": (None,)}

    def __init__(self, units, activation=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.units = _int(type(self).__name__, "units", units)
        self._activation = _activation(type(self).__name__, activation)

    def _keys(self, xs):
        return {"units": self.units}

    def _shape(self, shapes):
        return [self.units] if len(shapes[0]) == 1 else None


class Embedding(Layer):
    """embedding: a sparse table of `input_dim` rows (the table's
    vocabulary) of `output_dim` floats (dim) over an ids Input [n];
    `combiner` "mean" (default: [output_dim]), "sum", or "none" (Keras's:
    [n, output_dim], the field vectors DotInteraction and FM read).
    `dynamic=True` (no input_dim) reads an Input of dtype "ids64": a table
    keyed by 64-bit ids with `min_count`, `ttl_steps`, `max_rows`,
    `cache_steps` (config/README.md, "Dynamic tables")."""

    _type = "embedding"
    _keras = {"embeddings_initializer": ("uniform",), "embeddings_regularizer": (None,),
              "embeddings_constraint": (None,), "activity_regularizer": (None,), "mask_zero": (False,),
              "input_length": (None,), "sparse": (None, False, True), "lora_rank": (None,)}
    _DYNAMIC = ("min_count", "ttl_steps", "max_rows", "cache_steps")

    def __init__(self, input_dim=None, output_dim=None, combiner="mean", dynamic=False, min_count=None,
                 ttl_steps=None, max_rows=None, cache_steps=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        o = type(self).__name__
        if not isinstance(dynamic, bool):
            raise ValueError(f"{o}: dynamic: expected True or False, got {dynamic!r}")
        self.dynamic = dynamic
        if dynamic and input_dim is not None:
            raise ValueError(f"{o}: input_dim: a dynamic table has no vocabulary (a row is made for each id it "
                             "admits): leave input_dim out")
        if not dynamic and input_dim is None:
            raise ValueError(f"{o}: input_dim: give the table's rows (its vocabulary)")
        self.input_dim = None if input_dim is None else _int(o, "input_dim", input_dim)
        if output_dim is None:
            raise ValueError(f"{o}: output_dim: give the floats per row")
        self.output_dim = _int(o, "output_dim", output_dim)
        if combiner not in ("mean", "sum", "none", None):
            raise ValueError(f"{o}: combiner: expected 'mean', 'sum' or 'none', got {combiner!r}")
        self.combiner = combiner or "none"
        self.rules = {}
        for key, v in zip(self._DYNAMIC, (min_count, ttl_steps, max_rows, cache_steps)):
            if v is None:
                continue
            if not dynamic:
                raise ValueError(f"{o}: {key}: only a dynamic=True embedding has it")
            self.rules[key] = _int(o, key, v)

    def _kind(self, xs):
        kind = xs[0]._node.kind
        if kind == "float":
            want = "'ids64'" if self.dynamic else "'int64'"
            raise ValueError(f"{self._owner()}: needs an Input of ids (dtype {want}), got floats")
        if kind == "ids64" and not self.dynamic:
            raise ValueError(f"{self._owner()}: dynamic: an Input of dtype 'ids64' holds 64-bit ids: only an "
                             "Embedding(dynamic=True) reads it")
        if kind == "ids" and self.dynamic:
            raise ValueError(f"{self._owner()}: dynamic: a dynamic table reads an Input of dtype 'ids64'")

    def _keys(self, xs):
        keys = {} if self.dynamic else {"vocabulary": self.input_dim}
        keys["dim"] = self.output_dim
        keys["combiner"] = self.combiner
        if self.dynamic:
            keys["dynamic"] = True
            keys.update(self.rules)
        return keys

    def _shape(self, shapes):
        return [shapes[0][0], self.output_dim] if self.combiner == "none" else [self.output_dim]


# ---- merges ---------------------------------------------------------------------
class _Merge(Layer):
    _count = (2, 64)

    def __init__(self, activation=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self._activation = _activation(type(self).__name__, activation)

    def _shape(self, shapes):
        return shapes[0] if all(s == shapes[0] for s in shapes) else None


class Add(_Merge):
    """add: inputs of one shape, summed; `activation` (actorps's: the table's key)."""

    _type = "add"


class Multiply(_Merge):
    """multiply: inputs of one shape, multiplied elementwise."""

    _type = "multiply"


class Concatenate(_Merge):
    """concat: along the last axis."""

    _type = "concat"

    def __init__(self, axis=-1, activation=None, name=None, **kwargs):
        super().__init__(activation=activation, name=name, **kwargs)
        if axis != -1:
            raise ValueError(f"Concatenate: axis={axis!r} is not supported (the last axis: -1)")

    def _shape(self, shapes):
        if any(s[:-1] != shapes[0][:-1] for s in shapes):
            return None
        return shapes[0][:-1] + [sum(s[-1] for s in shapes)]


def add(inputs, name=None):
    """Add()(inputs)."""
    return Add(name=name)(inputs)


def multiply(inputs, name=None):
    """Multiply()(inputs)."""
    return Multiply(name=name)(inputs)


def concatenate(inputs, axis=-1, name=None):
    """Concatenate(axis)(inputs)."""
    return Concatenate(axis=axis, name=name)(inputs)


# ---- elementwise --------------------------------------------------------------------
class _Same(Layer):
    def _shape(self, shapes):
        return shapes[0]


class Activation(_Same):
    """relu, sigmoid, tanh, gelu or softmax (over the last axis) as a node;
    "linear" (or None) is no node: the input comes back."""

    def __init__(self, activation, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        a = activation.lower() if isinstance(activation, str) else activation
        if a not in _INLINE + _NODES + _NONE:
            raise ValueError(f"Activation: activation: {activation!r} is not supported (expected one of "
                             f"'linear', {', '.join(repr(x) for x in _INLINE + _NODES)})")
        self.activation = a
        self._type = None if a in _NONE else a

    def __call__(self, inputs):
        if self._type is None:
            (x,) = _tensors(self._owner(), inputs, (1, 1))
            return x
        return super().__call__(inputs)


class ReLU(_Same):
    """relu (Keras's defaults only: no max_value, slope or threshold)."""

    _type = "relu"
    _keras = {"max_value": (None,), "negative_slope": (0, 0.0), "threshold": (0, 0.0)}


class Softmax(_Same):
    """softmax over the last axis."""

    _type = "softmax"
    _keras = {"axis": (-1,)}


class GELU(_Same):
    """gelu."""

    _type = "gelu"
    _keras = {"approximate": (False,)}


class Dropout(_Same):
    """dropout: `rate` in [0, 1); identity in evaluation."""

    _type = "dropout"
    _keras = {"noise_shape": (None,), "seed": (None,)}

    def __init__(self, rate, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.rate = _number(type(self).__name__, "rate", rate)

    def _keys(self, xs):
        return {"rate": self.rate}


class LayerNormalization(_Same):
    """layernorm over the last axis, `epsilon` (Keras's default 1e-3)."""

    _type = "layernorm"
    _keras = {"axis": (-1,), "center": (True,), "scale": (True,), "rms_scaling": (False,),
              "beta_initializer": ("zeros",), "gamma_initializer": ("ones",), "beta_regularizer": (None,),
              "gamma_regularizer": (None,), "beta_constraint": (None,), "gamma_constraint": (None,)}

    def __init__(self, epsilon=1e-3, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.epsilon = _number(type(self).__name__, "epsilon", epsilon)

    def _keys(self, xs):
        return {"epsilon": self.epsilon}


class BatchNormalization(_Same):
    """batchnorm over the last axis: Keras's `momentum` m (moving = m *
    moving + (1 - m) * batch; default 0.99) is written as the table's
    PyTorch-style momentum 1 - m; `epsilon` (Keras's default 1e-3);
    `activation` (actorps's: the table's key, "relu" fused into the node)."""

    _type = "batchnorm"
    _keras = {"axis": (-1,), "center": (True,), "scale": (True,), "synchronized": (False,),
              "beta_initializer": ("zeros",), "gamma_initializer": ("ones",),
              "moving_mean_initializer": ("zeros",), "moving_variance_initializer": ("ones",),
              "beta_regularizer": (None,), "gamma_regularizer": (None,), "beta_constraint": (None,),
              "gamma_constraint": (None,)}

    def __init__(self, momentum=0.99, epsilon=1e-3, activation=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self._activation = _activation(type(self).__name__, activation)
        self.momentum = _number(type(self).__name__, "momentum", momentum)
        self.epsilon = _number(type(self).__name__, "epsilon", epsilon)

    def _keys(self, xs):
        # 12 digits: 1 - 0.99 is written 0.01, not 0.010000000000000009 (the loader reads a float32)
        return {"momentum": round(1.0 - self.momentum, 12), "epsilon": self.epsilon}


# ---- interactions -------------------------------------------------------------------
class DotInteraction(Layer):
    """dot_interaction (DLRM's): called on [dense, fields] (a vector [d] and
    an Embedding(combiner="none")'s [F, d]) -> [d + (F + 1) F / 2]: the
    dense vector, then the dot products of each pair of the F + 1 vectors;
    or on the fields alone -> [F (F - 1) / 2]. No self-interaction."""

    _type = "dot_interaction"
    _count = (1, 2)
    _keras = {"self_interaction": (False,), "skip_gather": (False,)}

    def _shape(self, shapes):
        fields = shapes[-1][0] + (len(shapes) == 2)
        pairs = fields * (fields - 1) // 2
        return [shapes[0][0] + pairs] if len(shapes) == 2 else [pairs]


class FM(Layer):
    """fm (a factorization machine's pairwise term): field vectors [F, d] -> [1]."""

    _type = "fm"

    def _shape(self, shapes):
        return [1]


# ---- the [model] table ----------------------------------------------------------------
def _loss(loss):
    key = loss.lower() if isinstance(loss, str) else loss
    if key not in _LOSSES:
        raise ValueError(f"loss: {loss!r} is not supported (expected one of {', '.join(sorted(_LOSSES))}; the "
                         "loss reads the last layer's logits)")
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


def model_config(inputs, outputs, loss="softmax_xent"):
    """The [model] table of the graph from `inputs` (an Input, or a list of
    them: their columns' order in each example's row) to `outputs` (the
    one tensor of logits), as the dict ``actorps.Model(config)`` takes:
    {"loss", "inputs": [{name, shape, kind}], "layers": [{name, type,
    inputs, ...}]}. Layers come in the order they were called."""
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
    out = outs[0]._node
    if out.type is None:
        raise ValueError("outputs: the logits must come from a layer, not straight from an Input")
    # Every node the output reads, in the order made (which reads before it is read).
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
    listed = {id(x._node) for x in ins}
    for n in nodes:
        for src in n.inputs:
            if src.type is None and id(src) not in listed:
                raise ValueError(f"inputs: the outputs read Input {src.name or '(unnamed)'!r}, which inputs does "
                                 "not list")
    # Names: the given ones, else the loader's defaults (x / input_<i>, <type>_<k>).
    names, taken, counts = {}, {}, {}
    for i, x in enumerate(ins):
        n = x._node
        names[id(n)] = n.name or ("x" if len(ins) == 1 else f"input_{i}")
    for n in nodes:
        k = counts.get(n.type, 0)
        counts[n.type] = k + 1
        names[id(n)] = n.name or f"{n.type}_{k}"
    for n in [x._node for x in ins] + nodes:
        name = names[id(n)]
        if name in taken:
            raise ValueError(f"name: {name!r} names two nodes of the model (an Input or layer's name, or the "
                             "default <type>_<k> of an unnamed one): give them different names")
        taken[name] = n
    config = {"loss": _loss(loss), "inputs": [], "layers": []}
    for x in ins:
        n = x._node
        entry = {"name": names[id(n)], "shape": list(n.shape)}
        if n.kind != "float":
            entry["kind"] = n.kind
        config["inputs"].append(entry)
    for n in nodes:
        entry = {"name": names[id(n)], "type": n.type, "inputs": [names[id(s)] for s in n.inputs]}
        entry.update(n.keys)
        config["layers"].append(entry)
    return config


def _value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a JSON string is a TOML basic string
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    raise TypeError(f"no TOML value for {type(v).__name__}: {v!r}")


def config_toml(config):
    """A [model] table's dict (model_config's) as TOML text."""
    lines = ["[model]"]
    lines += [f"{k} = {_value(v)}" for k, v in config.items() if not isinstance(v, list)]
    for key in ("inputs", "layers"):
        for item in config.get(key, []):
            lines += ["", f"[[model.{key}]]"] + [f"{k} = {_value(v)}" for k, v in item.items() if v is not None]
    return "\n".join(lines) + "\n"


def to_model_toml(inputs, outputs, loss="softmax_xent"):
    """model_config's table as TOML text: a [model] section for a job file."""
    return config_toml(model_config(inputs, outputs, loss))


class Sequential:
    """Keras's Sequential: layers each reading the one before, from one
    Input: ``Sequential([...], input_shape=(28, 28, 1))``, or an Input as
    the first item, or a first layer given ``input_shape=``. `inputs` and
    `outputs` are its tensors; `model_config(loss)` / `to_model_toml(loss)`
    its table."""

    def __init__(self, layers=None, input_shape=None, dtype="float32", name=None):
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

    def add(self, layer):
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
    def layers(self):
        return list(self._layers)

    def model_config(self, loss="softmax_xent"):
        if not self._layers:
            raise ValueError("Sequential: no layers")
        return model_config(self.inputs, self.outputs, loss)

    def to_model_toml(self, loss="softmax_xent"):
        return config_toml(self.model_config(loss))
