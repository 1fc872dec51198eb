"""The package's surface: names, exception classes, docstrings."""

import ast
import importlib
import inspect
import os
import pkgutil
import pydoc

import actorps
import actorps.errors

# Every public module of the package (actorps.layers, actorps.model, ...), found rather than listed.
MODULES = [actorps] + [importlib.import_module(f"actorps.{m.name}") for m in pkgutil.iter_modules(actorps.__path__)
                       if not m.name.startswith("_")]


def test_import_and_names():
    for name in actorps.__all__:
        assert hasattr(actorps, name), name
    assert os.access(actorps.ACTORPS_BIN, os.X_OK)
    assert actorps.Model.from_torch and actorps.ClusterCoordinator.schedule
    for name in ("SGD", "Adam", "Adagrad", "Ftrl"):
        assert issubclass(getattr(actorps.optimizers, name), actorps.optimizers.Optimizer)
    for name in ("MinSizePartitioner", "FixedShardsPartitioner", "MaxSizePartitioner"):
        assert hasattr(actorps.partitioners, name)
    for name in ("ModelCheckpoint", "BackupAndRestore", "TensorBoard", "EarlyStopping", "LearningRateScheduler"):
        assert issubclass(getattr(actorps.callbacks, name), actorps.callbacks.Callback)


def test_errors_are_tf_named():
    e = actorps.errors
    assert issubclass(e.OpError, RuntimeError)
    for name in e.__all__:
        cls = getattr(e, name)
        assert issubclass(cls, e.OpError), name
        assert cls.__module__ == "actorps.errors"
        assert cls.__doc__
    assert e.UnavailableError is actorps._actorps.UnavailableError


def _public(module):
    names = getattr(module, "__all__", [n for n in dir(module) if not n.startswith("_")])
    for n in names:
        obj = getattr(module, n)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            yield f"{module.__name__}.{n}", obj
            if inspect.isclass(obj):
                for m, f in vars(obj).items():
                    if not m.startswith("_") and (inspect.isfunction(f) or isinstance(f, (classmethod, property))):
                        yield f"{module.__name__}.{n}.{m}", f


def test_every_public_name_has_a_docstring():
    assert {"layers", "model", "coordinator", "errors"} <= {m.__name__.split(".")[-1] for m in MODULES}
    missing = []
    for module in MODULES:
        assert module.__doc__, module.__name__
        for name, obj in _public(module):
            target = obj.__func__ if isinstance(obj, classmethod) else obj.fget if isinstance(obj, property) else obj
            if not inspect.getdoc(target):
                missing.append(name)
    assert not missing, missing


def test_every_name_in_all_has_its_own_docstring():
    """Each module's __all__: modules, classes and functions with a docstring of their own."""
    missing = []
    for module in MODULES:
        assert hasattr(module, "__all__"), module.__name__
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.ismodule(obj) or inspect.isclass(obj) or inspect.isroutine(obj):
                if not (obj.__doc__ or "").strip():
                    missing.append(f"{module.__name__}.{name}")
    assert not missing, missing


def test_help_of_the_coordinator():
    text = pydoc.render_doc(actorps.ClusterCoordinator, renderer=pydoc.plaintext)
    for word in ("schedule", "join", "fetch", "create_per_worker_dataset", "RemoteValue"):
        assert word in text, word
    assert "Model(inputs=" in pydoc.render_doc(actorps.Model, renderer=pydoc.plaintext)


def test_the_pyi_declares_every_name_the_extension_binds():
    """actorps/_actorps.pyi (next to the module) declares each name of
    dir(_actorps) and each method of its classes."""
    ext = actorps._actorps
    path = os.path.join(os.path.dirname(actorps.__file__), "_actorps.pyi")
    tree = ast.parse(open(path).read())
    declared = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            declared[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)} | \
                {n.target.id for n in node.body if isinstance(n, ast.AnnAssign)}
        elif isinstance(node, ast.FunctionDef):
            declared[node.name] = set()
        elif isinstance(node, ast.AnnAssign):
            declared[node.target.id] = set()
    bound = [n for n in dir(ext) if not n.startswith("_")]
    assert sorted(set(bound) - set(declared)) == []
    assert sorted(n for n in declared if not n.startswith("_") and n not in bound) == []
    for name in bound:
        cls = getattr(ext, name)
        if inspect.isclass(cls) and not issubclass(cls, BaseException):
            methods = {m for m in vars(cls) if not m.startswith("_")}
            assert methods == declared[name] - {"__init__"}, name


def test_dataset_renders_its_table():
    ds = (actorps.Dataset.from_synthetic(100, 4, 3, seed=2).map("normalize", mean=0.5, stddev=2, first=1, count=2)
          .shuffle(10).repeat().skip(3).batch(8, drop_remainder=True))
    text = ds._toml("eval_dataset")
    assert text.startswith('[eval_dataset]\nsource = "synthetic"\nexamples = 100\n')
    assert text.count("[[eval_dataset.ops]]") == 5
    assert 'transform = "normalize"\nmean = 0.5\nstddev = 2.0\nfirst = 1\ncount = 2\n' in text
    assert 'type = "batch"\nsize = 8\ndrop_remainder = true\n' in text


def test_callback_list_order_and_keys(tmp_path):
    seen = []

    class Recorder(actorps.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            seen.append(("begin", epoch))

        def on_epoch_end(self, epoch, logs=None):
            seen.append(("end", epoch, sorted(logs)))

    class Model:
        stop_training = False

    cbs = actorps.callbacks.CallbackList(
        [Recorder(), actorps.callbacks.ModelCheckpoint(tmp_path, save_freq=100),
         actorps.callbacks.EarlyStopping(monitor="val_accuracy", patience=2)], model=Model())
    assert cbs._training() == {"checkpoint_dir": str(tmp_path), "checkpoint_keep": 3, "checkpoint_steps": 100,
                               "early_stopping_monitor": "test_accuracy", "early_stopping_min_delta": 0.0,
                               "early_stopping_patience": 2}
    cbs.on_epoch_begin(0)
    assert cbs.on_epoch_end(0, {"loss": 1.0, "accuracy": 0.5, "val_loss": 2.0, "val_accuracy": 0.4,
                                "epoch": 1, "step": 10, "seconds": 0.1}) is False
    assert seen == [("begin", 0), ("end", 0, ["accuracy", "loss", "val_accuracy", "val_loss"])]
    assert cbs.history.history == {"loss": [1.0], "accuracy": [0.5], "val_loss": [2.0], "val_accuracy": [0.4]}
