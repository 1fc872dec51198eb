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

``actorps.Model(config)`` takes the dict, as Keras's
``actorps.Model(inputs=x, outputs=logits)`` does the graph (and
``actorps.Model(layers.Sequential([...]))``). Every layer becomes one
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

import math

from ._graph import (  # noqa: F401 (Input ... to_model_toml: actorps.layers's names)
    Input, KerasTensor, Layer, Sequential, _int, _ints, _number, _pair, _tensors, _where, config_toml, model_config,
    to_model_toml,
)

__all__ = [
    "Activation", "Add", "AveragePooling2D", "BatchNormalization", "Concatenate", "Conv2D", "Dense",
    "DotInteraction", "Dropout", "Embedding", "FM", "Flatten", "GELU", "GlobalAveragePooling2D", "Input",
    "KerasTensor", "Layer", "LayerNormalization", "MaxPooling2D", "Multiply", "ReLU", "Reshape", "Sequential",
    "Softmax", "add", "concatenate", "config_toml", "model_config", "multiply", "to_model_toml",
]

# Activations as a key of the layer's own table ("relu"), as a node after it, or none.
_INLINE = ("relu",)
_NODES = ("sigmoid", "tanh", "gelu", "softmax")
_NONE = (None, "linear", "none")


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
