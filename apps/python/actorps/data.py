"""``tf.data.Dataset``, as far as a job's [dataset] table goes: a source
(IDX, CSV, TFRecord, synthetic) and the ops [[dataset.ops]] supports,
read by each worker on its own node (paths are the workers' paths).
A Dataset only describes the pipeline; `_toml()` renders it."""

import inspect
import os

from . import _toml

__all__ = ["Dataset", "DatasetCreator", "InputContext", "dataset_of"]

_TRANSFORMS = ("scale", "normalize", "log1p")
# config/criteo_dataset.toml's hash_buckets of C1..C26 (the 1-2-5 step at or above twice each vocabulary)
_CRITEO_BUCKETS = (5000, 2000, 200000, 100000, 1000, 50, 50000, 2000, 10, 200000, 20000, 200000, 10000, 100, 50000,
                   200000, 20, 20000, 5000, 10, 200000, 50, 50, 100000, 500, 50000)


class Dataset:
    """A per-worker input pipeline, built as in tf.data:

    >>> ds = (Dataset.from_idx("data/fashion/train-images-idx3-ubyte", "data/fashion/train-labels-idx1-ubyte")
    ...       .map("scale", factor=1 / 255).shuffle(30000).repeat().batch(64))

    Each method returns a new Dataset. In `Model.fit` and
    `ClusterCoordinator.create_per_worker_dataset` every worker reads its
    own shard (the coordinator adds a shard op).
    """

    def __init__(self, source, ops=()):
        self._source = dict(source)
        self._ops = list(ops)

    # -- sources ---------------------------------------------------------
    @classmethod
    def from_idx(cls, images, labels):
        """MNIST's IDX files: `images` (uint8 [n, h, w]) and `labels` (uint8 [n])."""
        return cls({"source": "idx", "images": _path(images), "labels": _path(labels)})

    @classmethod
    def from_csv(cls, files, columns, delimiter=",", header=False, shared_ids=None, bad_lines=None):
        """Delimited text files. `columns`: one dict per column, {"name",
        "kind": "numeric" | "categorical" | "label" | "ignore", and for a
        categorical one "vocabulary" (a list or a file) or "hash_buckets",
        "one_hot", "id64"}; a plain string is a numeric column of that name.
        `bad_lines`: "fail" (default) or "skip"."""
        cols = [{"name": c, "kind": "numeric"} if isinstance(c, str) else dict(c) for c in columns]
        return cls({"source": "csv", "files": _paths(files), "delimiter": delimiter, "header": bool(header),
                    "shared_ids": shared_ids, "bad_lines": bad_lines, "columns": cols})

    @classmethod
    def from_criteo(cls, files, hash_buckets=None, shared_ids=False, bad_lines="fail", log1p=True):
        """Criteo's tab-separated files (``actorps data criteo``'s; the
        CSV source of config/criteo_dataset.toml): the label, 13 counts
        I1..I13, 26 categorical values C1..C26 hashed into `hash_buckets`
        (one number for all, or 26; default: that file's); with `log1p`,
        log(1 + x) of the 13 counts."""
        buckets = _CRITEO_BUCKETS if hash_buckets is None else hash_buckets
        if isinstance(buckets, int):
            buckets = [buckets] * 26
        if len(buckets) != 26:
            raise ValueError(f"from_criteo: hash_buckets: expected one number or 26, got {len(buckets)}")
        columns = [{"name": "label", "kind": "label"}] + [f"I{i}" for i in range(1, 14)]
        columns += [{"name": f"C{i + 1}", "kind": "categorical", "hash_buckets": int(b)} for i, b in enumerate(buckets)]
        ds = cls.from_csv(files, columns, delimiter="\t", header=False, shared_ids=shared_ids or None,
                          bad_lines=bad_lines)
        return ds.map("log1p", first=0, count=13) if log1p else ds

    @classmethod
    def from_tfrecord(cls, files, features_key="x", label_key="label"):
        """TFRecord files of tf.train.Example: float features under
        `features_key`, an integer label under `label_key`."""
        return cls({"source": "tfrecord", "files": _paths(files), "features_key": features_key,
                    "label_key": label_key})

    @classmethod
    def from_synthetic(cls, examples, features, classes, seed=1):
        """`examples` random examples of `features` floats and `classes` labels."""
        return cls({"source": "synthetic", "examples": int(examples), "features": int(features),
                    "classes": int(classes), "seed": int(seed)})

    # -- ops -------------------------------------------------------------
    def _with(self, op):
        return Dataset(self._source, self._ops + [op])

    def map(self, transform, factor=None, mean=None, stddev=None, first=None, count=None):
        """A built-in transform of the features: "scale" (by `factor`),
        "normalize" ((x - `mean`) / `stddev`) or "log1p" (log(1 + max(x, 0)));
        on features [first, first + count) (default: all). Python functions
        are not supported: the workers run the pipeline in C++."""
        if callable(transform):
            raise ValueError("Dataset.map: a Python function cannot run on the workers; use a built-in "
                             f"transform ({', '.join(_TRANSFORMS)})")
        if transform not in _TRANSFORMS:
            raise ValueError(f"Dataset.map: unknown transform {transform!r} (expected one of {', '.join(_TRANSFORMS)})")
        return self._with({"type": "map", "transform": transform, "factor": _float(factor), "mean": _float(mean),
                           "stddev": _float(stddev), "first": first, "count": count})

    def filter(self, labels):
        """Keeps the examples whose label is one of `labels`."""
        return self._with({"type": "filter", "labels": [int(x) for x in labels]})

    def shard(self, num_shards, index):
        """Every `num_shards`-th example, from the `index`-th (one shard: the dataset itself)."""
        if int(num_shards) == 1 and int(index) == 0:
            return self
        return self._with({"type": "shard", "num_shards": int(num_shards), "index": int(index)})

    def shuffle(self, buffer_size, seed=1):
        """Draws each example at random from `buffer_size` held (epoch e: seed + e)."""
        return self._with({"type": "shuffle", "buffer_size": int(buffer_size), "seed": int(seed)})

    def repeat(self, count=-1):
        """`count` passes over the data (-1 or None: forever)."""
        return self._with({"type": "repeat", "count": -1 if count is None else int(count)})

    def skip(self, count):
        """Drops the first `count` examples."""
        return self._with({"type": "skip", "count": int(count)})

    def batch(self, size, drop_remainder=False):
        """Batches of `size` examples (the last one smaller unless `drop_remainder`)."""
        return self._with({"type": "batch", "size": int(size), "drop_remainder": bool(drop_remainder)})

    def prefetch(self, buffer_size=4):
        """Keeps `buffer_size` batch requests in flight (tf.data.AUTOTUNE, -1: 4)."""
        return self._with({"type": "prefetch", "batches": 4 if buffer_size in (None, -1) else int(buffer_size)})

    def take(self, count):
        """Not supported: [[dataset.ops]] has no take (use skip, shard or repeat)."""
        raise ValueError("Dataset.take is not supported by actorps's pipelines (ops: map, filter, shard, shuffle, "
                         "skip, repeat, batch, prefetch)")

    # -- rendering -------------------------------------------------------
    def _toml(self, table="dataset"):
        """The [table] and its [[table.ops]] as TOML text."""
        entries = dict(self._source)
        columns = entries.pop("columns", None)
        text = _toml.table(table, entries, arrays=False)
        if columns is not None:  # [[dataset.columns]] before the ops
            text = text.rstrip("\n") + "\n" + "columns = [\n" + "".join(
                f"  {_toml.value({k: v for k, v in c.items() if v is not None})},\n" for c in columns) + "]\n"
        for op in self._ops:
            text += f"\n[[{table}.ops]]\n" + "".join(
                f"{k} = {_toml.value(v)}\n" for k, v in op.items() if v is not None)
        return text

    @property
    def element_spec(self):
        """The source and ops as dicts (what `_toml` renders)."""
        return {"source": dict(self._source), "ops": [dict(o) for o in self._ops]}

    def __repr__(self):
        ops = "".join(f".{o['type']}(...)" for o in self._ops)
        return f"Dataset.from_{self._source.get('source')}(...){ops}"


def _path(p):
    return os.fspath(p)


def _paths(files):
    if isinstance(files, (str, os.PathLike)):
        files = [files]
    return [os.fspath(f) for f in files]


def _float(x):
    return None if x is None else float(x)


class InputContext:
    """What a `dataset_fn(input_context)` is told, as TF's
    tf.distribute.InputContext. The function runs once, on the
    coordinator, and its Dataset goes to every worker, where the
    coordinator puts each worker's own shard in front: so here
    `num_input_pipelines` is 1 and `input_pipeline_id` 0 (a
    ``dataset.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)`` a TF
    program writes is a no-op), and `num_replicas_in_sync` the workers."""

    def __init__(self, num_replicas_in_sync=1):
        self.num_input_pipelines = 1
        self.input_pipeline_id = 0
        self.num_replicas_in_sync = num_replicas_in_sync

    def get_per_replica_batch_size(self, global_batch_size):
        """The batch each worker reads of `global_batch_size`."""
        if global_batch_size % self.num_replicas_in_sync:
            raise ValueError(f"global batch size {global_batch_size} is not divisible by the "
                             f"{self.num_replicas_in_sync} workers")
        return global_batch_size // self.num_replicas_in_sync


class DatasetCreator:
    """TF's tf.keras.utils.experimental.DatasetCreator: `dataset_fn`, a
    function of an InputContext returning a Dataset, for Model.fit and
    ClusterCoordinator.create_per_worker_dataset."""

    def __init__(self, dataset_fn):
        if not callable(dataset_fn):
            raise TypeError(f"DatasetCreator: dataset_fn must be callable, got {type(dataset_fn).__name__}")
        self.dataset_fn = dataset_fn


def dataset_of(x, what, num_workers=1):
    """The Dataset `x` gives: a Dataset itself, or what a DatasetCreator or
    a function returns (called with an InputContext when it takes an
    argument); ValueError naming `what` for anything else."""
    fn = x.dataset_fn if isinstance(x, DatasetCreator) else x
    if callable(fn) and not isinstance(fn, Dataset):
        try:
            takes_context = len(inspect.signature(fn).parameters) > 0
        except (TypeError, ValueError):
            takes_context = False
        x = fn(InputContext(num_workers)) if takes_context else fn()
    if not isinstance(x, Dataset):
        raise ValueError(f"{what}: expected an actorps.data.Dataset, a DatasetCreator or a function returning a "
                         f"Dataset, got {type(x).__name__}")
    return x
