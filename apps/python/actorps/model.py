"""``tf.keras.Model`` for parameter-server training: a model (a graph of
named nodes in TOML, or a PyTorch ONNX export) created in a
ParameterServerStrategy's scope, compiled with an optimizer and trained
on the strategy's cluster. The job is one TOML text parsed by the C++
loader, so a bad setting raises ValueError with the loader's text."""

import os
import tempfile
import tomllib
import weakref

from . import _graph
from . import _toml
from . import optimizers as _optimizers
from .callbacks import CallbackList, keras_logs
from .data import Dataset, dataset_of
from .strategy import get_strategy

__all__ = ["Model"]

_METRICS = ("accuracy", "acc", "sparse_categorical_accuracy", "binary_accuracy", "auc", "loss")


def _loss_name(loss):
    """The table's loss for a Keras loss name or object (None: None)."""
    return None if loss is None else _graph._loss(loss)


class Model:
    """A model of a ParameterServerStrategy's cluster. Create it inside
    ``strategy.scope()``: ``Model(config)`` (the [model] table as a dict),
    Keras's functional ``Model(inputs=x, outputs=logits, loss=...)`` (an
    ``actorps.layers`` graph), ``Model(layers.Sequential([...]), loss=...)``,
    or `from_toml`, `from_config`, `from_onnx`, `from_torch` (`loss` is
    for the layers forms; a table names its own); then `compile`, `fit`, `evaluate`,
    `get_weights`, `set_weights`, `export`. Its variables go onto the PS
    tasks when it first trains, evaluates or exports (or at a
    ClusterCoordinator's first per-worker dataset); before, get_weights
    gives the values they will start from."""

    def __init__(self, config=None, name: str | None = None, *, inputs=None, outputs=None,
                 loss="softmax_xent"):
        if inputs is not None or outputs is not None:  # Keras's functional Model(inputs=..., outputs=...)
            if config is not None:
                raise TypeError("Model: give the [model] table or inputs= and outputs=, not both")
            config = _graph.model_config(inputs, outputs, loss)
        elif isinstance(config, _graph.Sequential):
            name = name or config.name
            config = config.model_config(loss)
        if not isinstance(config, dict):
            raise TypeError(f"Model: expected the [model] table as a dict, got {type(config).__name__}")
        self._config = dict(config)
        self.name = name or "model"
        self._strategy = get_strategy()
        if self._strategy is not None:
            self._strategy._model_refs.append(weakref.ref(self))
        self.optimizer = None
        self.loss = self._config.get("loss", "softmax_xent")
        self.compiled_metrics = ["accuracy"]
        self.steps_per_execution = 1
        self.stop_training = False
        self.history = None
        self._tmp = None  # from_torch's ONNX file's directory, kept with the model
        self._pending_weights = None  # set_weights before the first connection: assigned then

    # -- construction ----------------------------------------------------
    @classmethod
    def from_config(cls, config):
        """A model from its [model] table as a dict: {"input": [28, 28, 1],
        "loss": "softmax_xent", "layers": [{"type": "dense", "units": 10}, ...]}
        (config/README.md)."""
        return cls(config)

    @classmethod
    def from_toml(cls, path):
        """The [model] table of a TOML file (a model file such as
        config/seed_cnn.toml, or a whole job file)."""
        path = os.fspath(path)
        with open(path, "rb") as f:
            try:
                doc = tomllib.load(f)
            except tomllib.TOMLDecodeError as e:
                raise ValueError(f"{path}: {e}") from None
        if not isinstance(doc.get("model"), dict):
            raise ValueError(f"{path}: missing [model] table")
        # (a relative onnx path is the working directory's, as for the actorps program)
        return cls(dict(doc["model"]), name=os.path.splitext(os.path.basename(path))[0])

    @classmethod
    def from_onnx(cls, path, inputs=None, loss="softmax_xent"):
        """A graph exported by ``torch.onnx.export`` (opsets 13-17), trained
        from its initial weights. `inputs` names the graph's feature inputs:
        a dict name -> shape per example in actorps's layout ([h, w, c] for
        PyTorch's NCHW), or a list of dicts {"name", "shape", "kind"}
        ("float" or "ids")."""
        if inputs is None:
            raise ValueError("Model.from_onnx: name the graph's feature inputs (inputs={'x': [28, 28, 1]}); "
                             "actorps reads the graph's shapes against them")
        if isinstance(inputs, dict):
            inputs = [{"name": n, "shape": list(s)} for n, s in inputs.items()]
        return cls({"onnx": os.path.abspath(os.fspath(path)), "loss": _loss_name(loss),
                    "inputs": [dict(i) for i in inputs]},
                   name=os.path.splitext(os.path.basename(os.fspath(path)))[0])

    @classmethod
    def from_torch(cls, module, example_inputs, loss="softmax_xent", input_names=None, opset_version=13):
        """A PyTorch module, exported to ONNX (``torch.onnx.export`` with a
        dynamic batch axis) into a temporary file kept with the model, then
        `from_onnx`. `example_inputs`: a tensor or a tuple of them, batch
        first (an integer tensor is an ids input)."""
        import torch  # only here: the package does not need PyTorch otherwise

        args = example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)
        names = list(input_names or (["x"] if len(args) == 1 else [f"input_{i}" for i in range(len(args))]))
        if len(names) != len(args):
            raise ValueError(f"from_torch: {len(names)} input_names for {len(args)} example inputs")
        inputs = []
        for n, t in zip(names, args):
            shape = list(t.shape[1:])
            if t.dim() == 4:  # NCHW -> HWC
                shape = [shape[1], shape[2], shape[0]]
            kind = "float" if t.is_floating_point() else "ids"
            inputs.append({"name": n, "shape": [int(s) for s in shape], "kind": kind})
        tmp = tempfile.TemporaryDirectory(prefix="actorps-torch-")
        path = os.path.join(tmp.name, "model.onnx")
        was_training = module.training
        module.eval()
        try:
            torch.onnx.export(module, args, path, input_names=names, output_names=["logits"],
                              opset_version=opset_version, dynamic_axes={n: {0: "batch"} for n in names + ["logits"]})
        finally:
            module.train(was_training)
        model = cls.from_onnx(path, inputs=inputs, loss=loss)
        model.name = type(module).__name__
        model._tmp = tmp
        return model

    # -- rendering -------------------------------------------------------
    def _toml(self):
        config = dict(self._config)
        if self.loss is not None:
            config["loss"] = self.loss
        return _toml.table("model", config)

    def _training(self):
        keys = {"steps_per_execution": int(self.steps_per_execution)}
        if self.optimizer is not None:
            keys.update(self.optimizer._training())
        return keys

    def _optimizer_keys(self):
        """What the PS shards' optimizer is made of (the learning rate's
        per-epoch decay aside: fit sets it each epoch)."""
        keys = (self.optimizer or _optimizers.SGD())._training()
        keys.pop("learning_rate_decay", None)
        return keys

    def get_config(self):
        """The model's [model] table as a dict."""
        return dict(self._config)

    # -- compile, fit, evaluate ---------------------------------------------
    def compile(self, optimizer="sgd", loss=None, metrics=None, steps_per_execution=1):
        """Sets the optimizer (an actorps.optimizers one or its name), the loss
        (default: the model's; "sparse_categorical_crossentropy" is
        softmax_xent over logits), and `steps_per_execution` (steps per
        closure). Loss and accuracy are always reported (and AUC for a
        binary model); other `metrics` are refused."""
        self.optimizer = _optimizers.get(optimizer)
        if loss is not None:
            self.loss = _loss_name(loss)
        for m in metrics or []:
            if not isinstance(m, str) or m.lower() not in _METRICS:
                raise ValueError(f"metric {m!r} is not supported (the cluster reports loss and accuracy, and AUC "
                                 "for a binary model)")
        self.compiled_metrics = list(metrics or ["accuracy"])
        if int(steps_per_execution) < 1:
            raise ValueError(f"steps_per_execution: expected a number >= 1, got {steps_per_execution!r}")
        self.steps_per_execution = int(steps_per_execution)

    def _strategy_or_raise(self):
        if self._strategy is None:
            raise ValueError(f"{self.name}: create the model inside a ParameterServerStrategy's scope() "
                             "(with strategy.scope(): model = ...)")
        return self._strategy

    def _session(self):
        session, _ = self._strategy_or_raise()._connect(self, None, self._training())
        return session

    def fit(self, x=None, epochs=1, steps_per_epoch=None, validation_data=None, callbacks=None, verbose="auto",
            initial_epoch=0):
        """Trains on the strategy's cluster: each worker reads its shard of
        `x` (a Dataset, or a DatasetCreator), closures of steps_per_execution steps run on
        whichever worker is free, `validation_data` (a Dataset) is
        evaluated on the workers after each epoch. `steps_per_epoch` is
        required, as in TF's parameter-server training. Returns a History
        (history: loss, accuracy, val_loss, val_accuracy per epoch).
        Ctrl-C writes a checkpoint (with a ModelCheckpoint or
        BackupAndRestore) and raises KeyboardInterrupt. `verbose=0`: no
        progress bar or epoch lines on stdout."""
        strategy = self._strategy_or_raise()
        x = dataset_of(x, "fit: x", strategy.num_workers)
        if validation_data is not None:
            validation_data = dataset_of(validation_data, "fit: validation_data", strategy.num_workers)
        if steps_per_epoch is None:
            raise ValueError("fit: steps_per_epoch is required in parameter-server training (as in TF): "
                             "the workers' datasets repeat")
        if initial_epoch:
            raise ValueError("fit: initial_epoch is not supported (a ModelCheckpoint or BackupAndRestore "
                             "directory resumes where training stopped)")
        if self.optimizer is None:
            self.compile()
        cbs = CallbackList(callbacks, model=self, params={"epochs": epochs, "steps": steps_per_epoch,
                                                          "verbose": verbose})
        training = self._training()
        training.update({"epochs": int(epochs), "steps_per_epoch": int(steps_per_epoch)})
        training.update(cbs._training())
        text = strategy._job_text(self, x, validation_data, training)
        job = strategy._parse(text, f"<{self.name}.fit>")
        session, fresh = strategy._connect(self, job=job)
        if not fresh:  # this fit's data as the workers' "train" dataset
            session.create_per_worker_dataset("train", x._toml("dataset"), f"<{self.name}.fit>")
        self.stop_training = False
        self.history = cbs.history
        cbs.on_train_begin()
        history = session.fit(job, cbs, verbose=verbose not in (0, False))
        cbs.on_train_end(keras_logs(history[-1]) if history else None)
        return self.history

    def evaluate(self, x=None, return_dict=False, verbose="auto"):
        """Loss and accuracy (then AUC and log loss for a binary model) of
        the current variables on `x` (a Dataset or DatasetCreator),
        evaluated in parts on the workers. As Keras: a list [loss,
        accuracy, ...], or with `return_dict` a dict of the same names."""
        x = dataset_of(x, "evaluate: x", self._strategy_or_raise().num_workers)
        out = self._session().evaluate(x._toml("dataset"), f"<{self.name}.evaluate>")
        out.pop("examples", None)
        return out if return_dict else [out[k] for k in ("loss", "accuracy", "auc", "log_loss") if k in out]

    # -- weights -----------------------------------------------------------
    def _connected(self):
        """This model's session when its variables are on the PS tasks, else None."""
        strategy = self._strategy
        if strategy is not None and strategy._session is not None and strategy._session_model is self:
            return strategy._session
        return None

    def _weights(self):
        session = self._connected()
        if session is not None:
            return session.get_weights()
        if self._pending_weights is not None:
            return dict(self._pending_weights)
        # Not on the cluster yet: the values a connection would start from.
        strategy = self._strategy_or_raise()
        job = strategy._parse(strategy._job_text(self, None, None, dict(self._training(), steps_per_epoch=1)),
                              f"<{self.name}>")
        return job.initial_weights()

    def get_weights(self):
        """The variables' current values, as float32 numpy arrays in the
        model's parameter order (their shapes as the model declares them);
        before the model first connects, the values it will start from."""
        return list(self._weights().values())

    def get_weight_names(self):
        """The variables' names, in get_weights' order (e.g. "dense_1/kernel")."""
        return list(self._weights().keys())

    def set_weights(self, weights):
        """Assigns the variables, given in get_weights' order (or as a dict
        by name); before the model first connects, they are assigned then."""
        names = self.get_weight_names()
        if not isinstance(weights, dict):
            weights = list(weights)
            if len(weights) != len(names):
                raise ValueError(f"set_weights: the model has {len(names)} variables, got {len(weights)} values")
            weights = dict(zip(names, weights))
        session = self._connected()
        if session is not None:
            session.set_weights(weights)
            return
        import numpy as np

        current = self._weights()
        for name, value in weights.items():
            if name not in current:
                raise ValueError(f"set_weights: no variable '{name}'")
            if np.shape(value) != current[name].shape and np.size(value) != current[name].size:
                raise ValueError(f"set_weights: '{name}' has shape {current[name].shape}, not {np.shape(value)}")
        self._pending_weights = {n: np.array(weights.get(n, current[n]), dtype=np.float32).reshape(current[n].shape)
                                 for n in current}

    def export(self, filepath, format="onnx"):
        """Writes the model with its current values: `format` "onnx" (the
        graph and its weights, as `actorps export --format onnx`) or
        "safetensors" (the variables by name, the model and the step in
        its metadata)."""
        if format == "onnx":
            self._session().export_onnx(os.fspath(filepath))
        elif format == "safetensors":
            timing = self.history.timing if getattr(self, "history", None) is not None else []
            self._session().export_safetensors(os.fspath(filepath), timing[-1]["step"] if timing else 0,
                                               len(timing))
        else:
            raise ValueError(f"export: format {format!r}: expected \"onnx\" or \"safetensors\"")

    def __repr__(self):
        return f"<actorps.Model {self.name}>"
