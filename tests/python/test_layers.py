"""actorps.layers: Keras's functional API writes the [model] table the C++
loader reads (config/README.md): the same graphs as the repository's
model files, and bad arguments as ValueError (Python's naming the
argument, the loader's naming file:line:column and the key)."""

import importlib
import json
import os
import re
import sys
import tomllib
import types

import pytest

SOURCE = os.environ.get("ACTORPS_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CONFIG = os.path.join(SOURCE, "config")

try:
    from actorps import layers
except ImportError:  # no package built (or one before layers.py): the source files, without _actorps
    _source = types.ModuleType("actorps_source")
    _source.__path__ = [os.path.join(SOURCE, "apps", "python", "actorps")]
    sys.modules["actorps_source"] = _source
    layers = importlib.import_module("actorps_source.layers")

try:
    import actorps
    from actorps import _actorps
except ImportError:
    actorps = _actorps = None

needs_loader = pytest.mark.skipif(_actorps is None, reason="no actorps._actorps module built (PYTHONPATH=build/python)")

# Nothing listens here: parse_job only reads the topology.
CLUSTER = json.dumps({"cluster": {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"], "ps": ["127.0.0.1:3"]}})


def _model_table(path):
    with open(path, "rb") as f:
        return tomllib.load(f)["model"]


def _parse(model_text, source="layers.toml"):
    """The job of `model_text` plus a [training] table, as the loader parses it."""
    return _actorps.parse_job(model_text + "\n[training]\nsteps_per_epoch = 1\n", source, CLUSTER)


def _with_defaults(table):
    """A model table's layers with the loader's defaults written out: names
    (<type>_<k>) and inputs (the node before; the first input)."""
    first = table["inputs"][0]["name"] if "inputs" in table else "x"
    counts, out, before = {}, [], first
    for layer in table["layers"]:
        layer = dict(layer)
        k = counts.get(layer["type"], 0)
        counts[layer["type"]] = k + 1
        layer.setdefault("name", f"{layer['type']}_{k}")
        layer.setdefault("inputs", [before])
        before = layer["name"]
        out.append(layer)
    return out


def fashion_cnn():
    x = layers.Input(shape=(28, 28, 1))
    h = layers.Conv2D(32, 3, activation="relu")(x)
    h = layers.MaxPooling2D(2)(h)
    h = layers.Flatten()(h)
    h = layers.Dense(64, activation="relu")(h)
    return x, layers.Dense(10)(h)


# ---- the Fashion-MNIST CNN ------------------------------------------------------------
def test_fashion_cnn_is_seed_cnn():
    x, logits = fashion_cnn()
    assert logits.shape == (None, 10)
    config = layers.model_config(x, logits, loss="softmax_xent")
    assert config["inputs"] == [{"name": "x", "shape": [28, 28, 1]}]  # the sequential form's input "x"
    seed = _model_table(os.path.join(CONFIG, "seed_cnn.toml"))
    assert config["loss"] == seed["loss"]
    ours = config["layers"]
    theirs = _with_defaults(seed)
    assert [l["type"] for l in ours] == [l["type"] for l in theirs] == ["conv2d", "maxpool2d", "flatten", "dense",
                                                                         "dense"]
    for a, b in zip(ours, theirs):
        b = dict(b)
        if b["type"] == "conv2d":
            b.setdefault("padding", "valid")
        assert a == b, (a, b)
    # The TOML text says the same (tomllib reads back the dict).
    assert tomllib.loads(layers.to_model_toml(x, logits))["model"] == config


def test_sequential_is_the_functional_model():
    seq = layers.Sequential([
        layers.Conv2D(32, (3, 3), activation="relu"),
        layers.MaxPooling2D((2, 2)),
        layers.Flatten(),
        layers.Dense(64, activation="relu"),
        layers.Dense(10),
    ], input_shape=(28, 28, 1))
    x, logits = fashion_cnn()
    assert seq.model_config() == layers.model_config(x, logits)
    assert seq.to_model_toml() == layers.to_model_toml(x, logits)
    # Keras's other ways to give the input: an Input first, or input_shape on the first layer.
    first = layers.Sequential([layers.Input((28, 28, 1)), layers.Flatten(), layers.Dense(10)])
    other = layers.Sequential([layers.Flatten(input_shape=(28, 28, 1)), layers.Dense(10)])
    assert first.model_config() == other.model_config()
    with pytest.raises(ValueError, match="input_shape"):
        layers.Sequential([layers.Flatten(), layers.Dense(10)]).model_config()


@needs_loader
def test_fashion_cnn_job_loads(tmp_path):
    """config/fashion_mnist.toml with its [model] table replaced by ours loads as `actorps train` loads it."""
    x, logits = fashion_cnn()
    with open(os.path.join(CONFIG, "fashion_mnist.toml")) as f:
        text = f.read()
    start, end = text.index("\n[model]"), text.index("\n[dataset]")
    job_text = text[:start + 1] + layers.to_model_toml(x, logits) + text[end:]
    assert job_text.count("[model]") == 1
    path = tmp_path / "fashion_mnist_layers.toml"
    path.write_text(job_text)
    job = _actorps.load_job(str(path))
    assert job.epochs == 10 and len(job.tasks) == 5
    # A model the loader rejects, in the same file: file:line:column and the key.
    bad_x = layers.Input((28, 28, 1))
    bad = layers.Dense(10)(layers.Dense(0)(layers.Flatten()(bad_x)))
    path.write_text(text[:start + 1] + layers.to_model_toml(bad_x, bad) + text[end:])
    with pytest.raises(ValueError, match=re.escape(str(path)) + r":\d+:\d+: model\.layers\[1\]\.units"):
        _actorps.load_job(str(path))


# ---- graphs ------------------------------------------------------------------------------
def test_two_inputs_dense_and_embedding_branches():
    """config/README.md's graph: names and inputs as given."""
    numeric = layers.Input(shape=(13,), name="numeric")
    categorical = layers.Input(shape=(26,), name="categorical", dtype="int64")
    deep = layers.Dense(64, activation="relu", name="deep")(numeric)
    cat = layers.Embedding(100000, 16, name="cat")(categorical)
    assert cat.shape == (None, 16) and categorical.dtype == "int64"
    joined = layers.Concatenate()([deep, cat])
    assert joined.shape == (None, 80)
    logit = layers.Dense(1)(joined)
    config = layers.model_config([numeric, categorical], logit, loss="binary_crossentropy")
    assert config == {
        "loss": "sigmoid_bce",
        "inputs": [{"name": "numeric", "shape": [13]}, {"name": "categorical", "shape": [26], "kind": "ids"}],
        "layers": [
            {"name": "deep", "type": "dense", "inputs": ["numeric"], "units": 64, "activation": "relu"},
            {"name": "cat", "type": "embedding", "inputs": ["categorical"], "vocabulary": 100000, "dim": 16,
             "combiner": "mean"},
            {"name": "concat_0", "type": "concat", "inputs": ["deep", "cat"]},
            {"name": "dense_1", "type": "dense", "inputs": ["concat_0"], "units": 1},
        ],
    }
    # The README's own example (no names on the last two) is the same graph.
    readme = open(os.path.join(CONFIG, "README.md")).read()
    example = readme[readme.index("```toml\n[model]") + 8:]
    example = tomllib.loads(example[:example.index("```")])["model"]
    assert [dict(l, combiner="mean") if l["type"] == "embedding" else l
            for l in _with_defaults(example)] == config["layers"]
    if _actorps is not None:
        _parse(layers.config_toml(config))


def test_dlrm_is_the_zoo_file():
    """config/zoo/dlrm.toml: bottom MLP, field vectors, dot_interaction, top MLP."""
    numeric = layers.Input((13,), name="numeric")
    categorical = layers.Input((26,), name="categorical", dtype="int64")
    h = layers.Dense(64, activation="relu", name="bottom_1")(numeric)
    bottom = layers.Dense(16, activation="relu", name="bottom")(h)
    fields = layers.Embedding(1415790, 16, combiner="none", name="fields")(categorical)
    assert fields.shape == (None, 26, 16)
    h = layers.DotInteraction(name="interaction")([bottom, fields])
    assert h.shape == (None, 16 + 27 * 26 // 2)
    h = layers.Dense(128, activation="relu")(h)
    h = layers.Dense(64, activation="relu")(h)
    logit = layers.Dense(1)(h)
    config = layers.model_config([numeric, categorical], logit, loss="sigmoid_bce")
    zoo = _model_table(os.path.join(CONFIG, "zoo", "dlrm.toml"))
    assert config["inputs"] == zoo["inputs"] and config["loss"] == zoo["loss"]
    assert config["layers"] == _with_defaults(zoo)
    if _actorps is not None:
        _parse(layers.config_toml(config))


def test_resnet_is_the_zoo_file():
    """config/zoo/resnet.toml: residual blocks (add), batch norm, strides, global pooling, dropout."""
    def bn(name, relu=True):  # the file's batch norm: PyTorch's momentum 0.1 (Keras's 0.9), epsilon 1e-5
        return layers.BatchNormalization(momentum=0.9, epsilon=1e-5, activation="relu" if relu else None, name=name)

    x = layers.Input((28, 28, 1))
    h = bn("stem_bn")(layers.Conv2D(32, 3, padding="same", name="stem_conv")(x))
    pool = layers.MaxPooling2D(2, name="pool")(h)
    h = bn("block1_bn1")(layers.Conv2D(32, 3, padding="same", name="block1_conv1")(pool))
    h = bn("block1_bn2", False)(layers.Conv2D(32, 3, padding="same", name="block1_conv2")(h))
    block1 = layers.ReLU(name="block1")(layers.Add(name="block1_add")([pool, h]))
    down = bn("down")(layers.Conv2D(64, 3, strides=2, padding="same", name="down_conv")(block1))
    assert down.shape == (None, 7, 7, 64)
    h = bn("block2_bn1")(layers.Conv2D(64, 3, padding="same", name="block2_conv1")(down))
    h = bn("block2_bn2", False)(layers.Conv2D(64, 3, padding="same", name="block2_conv2")(h))
    h = layers.Activation("relu", name="block2")(layers.add([down, h], name="block2_add"))
    h = layers.Dropout(0.3)(layers.GlobalAveragePooling2D()(h))
    logits = layers.Dense(10)(h)
    config = layers.model_config(x, logits)
    zoo = _with_defaults(_model_table(os.path.join(CONFIG, "zoo", "resnet.toml")))
    ours = []
    for l in config["layers"]:
        if l["type"] == "batchnorm":
            assert l.pop("momentum") == pytest.approx(0.1) and l.pop("epsilon") == 1e-5
        ours.append(l)
    assert ours == zoo
    if _actorps is not None:
        _parse(layers.config_toml(config))


def test_keras_batchnorm_momentum_is_written_pytorch_style():
    x = layers.Input((8,))
    y = layers.Dense(2)(layers.BatchNormalization()(x))
    bn = layers.model_config(x, y)["layers"][0]
    assert bn == {"name": "batchnorm_0", "type": "batchnorm", "inputs": ["x"], "momentum": 0.01, "epsilon": 1e-3}
    y = layers.Dense(2)(layers.BatchNormalization(momentum=0.9)(x))
    assert layers.model_config(x, y)["layers"][0]["momentum"] == 0.1


def test_every_layer_type_parses():
    """Each layer's keys as the loader reads them: strides, pads, SAME pooling, reshape, norms, fm."""
    x = layers.Input((28, 28, 3), name="image")
    a = layers.Conv2D(8, 3, strides=(2, 1), padding=[1, 1, 1, 1], name="a")(x)
    assert a.shape == (None, 14, 28, 8)
    b = layers.MaxPooling2D(3, strides=2, padding="same", name="b")(a)  # TF's SAME: pads from the size
    assert b.shape == (None, 7, 14, 8)
    c = layers.AveragePooling2D(2, name="c")(b)
    d = layers.Multiply(name="d")([c, c])
    e = layers.Reshape((-1, 8), name="e")(d)
    assert e.shape == (None, 21, 8)
    f = layers.LayerNormalization(name="f")(e)
    g = layers.Activation("gelu", name="g")(f)
    h = layers.Softmax(name="h")(g)
    k = layers.Dense(4, activation="tanh", name="k")(layers.Flatten(name="flat")(h))  # tanh: a node after it
    m = layers.Dense(3, activation="sigmoid")(k)
    n = layers.Dense(10)(m)
    config = layers.model_config(x, n)
    by = {l["name"]: l for l in config["layers"]}
    assert by["a"] == {"name": "a", "type": "conv2d", "inputs": ["image"], "filters": 8, "kernel": 3,
                       "strides": [2, 1], "pads": [1, 1, 1, 1]}
    assert by["b"] == {"name": "b", "type": "maxpool2d", "inputs": ["a"], "pool": 3, "stride": 2,
                       "pads": [0, 0, 1, 1]}
    assert by["e"]["shape"] == [-1, 8] and by["f"]["epsilon"] == 1e-3
    assert [l["type"] for l in config["layers"]][-5:] == ["dense", "tanh", "dense", "sigmoid", "dense"]
    # (k is dense #0 of the model: the unnamed ones are dense_1 and dense_2, as the loader counts)
    assert by["k_tanh"]["inputs"] == ["k"] and by["dense_1"]["inputs"] == ["k_tanh"]
    assert by["sigmoid_0"]["inputs"] == ["dense_1"] and by["dense_2"]["inputs"] == ["sigmoid_0"]
    if _actorps is not None:
        _parse(layers.config_toml(config))
    # fm over field vectors; a dynamic table over 64-bit ids.
    ids = layers.Input((4,), name="ids", dtype="ids64")
    v = layers.Embedding(output_dim=8, combiner="none", dynamic=True, min_count=2, cache_steps=3)(ids)
    logit = layers.FM()(v)
    config = layers.model_config(ids, logit, loss="sigmoid_bce")
    assert config["inputs"] == [{"name": "ids", "shape": [4], "kind": "ids64"}]
    assert config["layers"][0] == {"name": "embedding_0", "type": "embedding", "inputs": ["ids"], "dim": 8,
                                   "combiner": "none", "dynamic": True, "min_count": 2, "cache_steps": 3}
    if _actorps is not None:
        _parse(layers.config_toml(config))


def test_layers_come_in_call_order_and_only_what_the_output_reads():
    a = layers.Input((4,), name="a")
    b = layers.Input((4,), name="b")
    hb = layers.Dense(3, name="hb")(b)
    ha = layers.Dense(3, name="ha")(a)
    layers.Dense(5, name="unused")(ha)  # not read by the output: left out
    out = layers.Dense(2, name="out")(layers.Add()([ha, hb]))
    config = layers.model_config([a, b], out)
    assert [l["name"] for l in config["layers"]] == ["hb", "ha", "add_0", "out"]
    assert [i["name"] for i in config["inputs"]] == ["a", "b"]
    # Unnamed inputs: x alone, else input_<i>.
    p, q = layers.Input((2,)), layers.Input((2,))
    config = layers.model_config([p, q], layers.Dense(2)(layers.Concatenate()([p, q])))
    assert [i["name"] for i in config["inputs"]] == ["input_0", "input_1"]
    assert config["layers"][0]["inputs"] == ["input_0", "input_1"]


# ---- bad arguments -------------------------------------------------------------------------
@pytest.mark.parametrize("make, arg", [
    (lambda: layers.Dense(2.5), "units"),
    (lambda: layers.Dense(4, kernel_initializer="he_normal"), "kernel_initializer"),
    (lambda: layers.Dense(4, use_bias=False), "use_bias"),
    (lambda: layers.Dense(4, foo=1), "'foo'"),
    (lambda: layers.Dense(4, activation="elu"), "activation"),
    (lambda: layers.Conv2D(8, (3, 5)), "kernel_size"),
    (lambda: layers.Conv2D(8, 3, padding="causal"), "padding"),
    (lambda: layers.Conv2D(8, 3, dilation_rate=2), "dilation_rate"),
    (lambda: layers.MaxPooling2D(2, strides=(1, 2)), "strides"),
    (lambda: layers.Embedding(10, 4, mask_zero=True), "mask_zero"),
    (lambda: layers.Embedding(10, 4, combiner="sqrtn"), "combiner"),
    (lambda: layers.Embedding(10, 4, min_count=2), "min_count"),
    (lambda: layers.Embedding(10, 4, dynamic=True), "input_dim"),
    (lambda: layers.Concatenate(axis=1), "axis"),
    (lambda: layers.Reshape((2, 2, 2, 2)), "target_shape"),
    (lambda: layers.LayerNormalization(center=False), "center"),
    (lambda: layers.BatchNormalization(axis=1), "axis"),
    (lambda: layers.ReLU(max_value=6.0), "max_value"),
    (lambda: layers.Activation("swish"), "activation"),
    (lambda: layers.DotInteraction(self_interaction=True), "self_interaction"),
    (lambda: layers.Input((None, 3)), "shape"),
    (lambda: layers.Input((3,), dtype="float16"), "dtype"),
    (lambda: layers.Input((3,), sparse=True), "sparse"),
])
def test_python_names_the_argument(make, arg):
    with pytest.raises(ValueError, match=re.escape(arg)):
        make()


def test_bad_graphs():
    x = layers.Input((4,), name="x")
    ids = layers.Input((3,), name="ids", dtype="int64")
    with pytest.raises(ValueError, match="ids"):
        layers.Dense(2)(ids)
    with pytest.raises(ValueError, match="Embedding.*ids"):
        layers.Embedding(10, 2)(x)
    dense = layers.Dense(2)
    dense(x)
    with pytest.raises(ValueError, match="called twice"):
        dense(x)
    with pytest.raises(ValueError, match="takes 2 to 64 inputs"):
        layers.Add()(x)
    h = layers.Dense(2)(x)
    with pytest.raises(ValueError, match="one output"):
        layers.model_config(x, [h, layers.Dense(2)(x)])
    with pytest.raises(ValueError, match="inputs: the outputs read Input 'ids'"):
        layers.model_config(x, layers.Concatenate()([h, layers.Embedding(10, 2)(ids)]))
    with pytest.raises(ValueError, match="inputs\\[0\\]"):
        layers.model_config(h, layers.Dense(2)(h))
    with pytest.raises(ValueError, match="'dense_0' names two nodes"):
        layers.model_config(x, layers.Dense(2)(layers.Dense(2, name="dense_0")(layers.Dense(2)(x))))
    with pytest.raises(ValueError, match="loss"):
        layers.model_config(x, h, loss="hinge")


@needs_loader
@pytest.mark.parametrize("build, where", [
    (lambda x: layers.Dense(10)(layers.Dense(0)(layers.Flatten()(x))), r"model\.layers\[1\]\.units"),
    (lambda x: layers.Dense(10)(layers.Dropout(1.5)(layers.Flatten()(x))), r"model\.layers\[1\]\.rate"),
    (lambda x: layers.Dense(10)(layers.Conv2D(4, 99)(x)), r"model\.layers\[0\]\.kernel: expected an integer"),
    (lambda x: layers.Dense(10)(layers.Conv2D(4, 29)(x)), r"model\.layers\[0\] \(conv2d_0\).*larger than"),
    (lambda x: layers.Dense(10)(x), r"model\.layers\[0\] \(dense_0\).*flat input"),
    (lambda x: layers.Dense(10)(layers.Flatten()(layers.LayerNormalization(epsilon=0.0)(x))),
     r"model\.layers\[0\]\.epsilon"),
])
def test_the_loader_names_file_line_and_key(build, where):
    x = layers.Input((28, 28, 1))
    text = layers.to_model_toml(x, build(x))
    with pytest.raises(ValueError, match=r"bad\.toml:\d+:\d+: " + where):
        _parse(text, "bad.toml")


# ---- actorps.Model -------------------------------------------------------------------------
@needs_loader
def test_actorps_model_takes_the_config():
    """actorps.Model(config) (model.py's public entry point) renders a job the loader parses."""
    x, logits = fashion_cnn()
    config = layers.model_config(x, logits)
    model = actorps.Model(config)
    assert model.get_config() == config and model.loss == "softmax_xent"
    _parse(model._toml(), "<model>")
    assert tomllib.loads(model._toml())["model"] == config


def _seed_cnn_layers():
    """config/seed_cnn.toml's layers as our Conv2D ... Dense(10), uncalled."""
    return [layers.Conv2D(32, 3, activation="relu"), layers.MaxPooling2D(2), layers.Flatten(),
            layers.Dense(64, activation="relu"), layers.Dense(10)]


@needs_loader
def test_functional_and_sequential_models_are_the_seed_cnn():
    """actorps.Model(inputs=, outputs=) (Keras's functional Model) and
    actorps.Model(layers.Sequential(...)) render the seed CNN's [model] table."""
    seed = _model_table(os.path.join(CONFIG, "seed_cnn.toml"))
    seed_model = actorps.Model.from_toml(os.path.join(CONFIG, "seed_cnn.toml"))
    seed_layers = [dict(l, padding="valid") if l["type"] == "conv2d" else l for l in _with_defaults(seed)]
    x, logits = fashion_cnn()
    functional = actorps.Model(inputs=x, outputs=logits)
    sequential = actorps.Model(layers.Sequential(_seed_cnn_layers(), input_shape=(28, 28, 1), name="seq"))
    assert sequential.name == "seq"
    for model in (functional, sequential):
        assert model.loss == seed_model.loss == "softmax_xent"
        table = tomllib.loads(model._toml())["model"]
        assert table["inputs"] == [{"name": "x", "shape": seed["input"]}]
        assert table["layers"] == seed_layers
        job = _parse(model._toml(), "<model>")
        assert {n: w.shape for n, w in job.initial_weights().items()} == \
            {n: w.shape for n, w in _parse(seed_model._toml(), "<seed>").initial_weights().items()}
    assert functional.get_config() == sequential.get_config()


@needs_loader
def test_functional_model_loss_and_bad_arguments():
    x = layers.Input((13,), name="numeric")
    logit = layers.Dense(1)(x)
    model = actorps.Model(inputs=[x], outputs=logit, loss="binary_crossentropy")
    assert model.loss == "sigmoid_bce" and model.get_config()["loss"] == "sigmoid_bce"
    assert actorps.Model(layers.Sequential([layers.Dense(1)], input_shape=(13,)), loss="mse").loss == "mse"
    with pytest.raises(ValueError, match="loss: 'hinge'"):
        actorps.Model(inputs=x, outputs=logit, loss="hinge")
    with pytest.raises(ValueError, match="inputs: expected a tensor"):
        actorps.Model(outputs=logit)
    with pytest.raises(TypeError, match="not both"):
        actorps.Model({"layers": []}, inputs=x, outputs=logit)
    with pytest.raises(TypeError, match="dict"):
        actorps.Model([layers.Dense(1)])
    assert actorps.layers is layers
