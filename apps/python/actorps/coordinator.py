"""``tf.distribute.experimental.coordinator.ClusterCoordinator``: a custom
training loop's closures scheduled on whichever worker is free, against
per-worker datasets, with futures (RemoteValue) for their results.

The closures are the workers' built-in functions, by name
(actors/worker/worker_functions.hpp): ``train_step(dataset, steps=1)``
returns [loss_sum, correct, examples, steps]; ``eval_step``; ``noop()``.
"""

from . import _actorps
from .data import dataset_of

__all__ = ["ClusterCoordinator", "PerWorkerDataset", "RemoteValue", "FUNCTIONS"]

#: The functions a closure can call (a worker binary may register more).
FUNCTIONS = ("train_step", "train_split", "eval_step", "noop")


class PerWorkerDataset:
    """A dataset created on every worker (each reads its own shard): pass
    it, or ``iter()`` of it (itself), as a closure argument, and each
    worker reads its own copy, as TF's per-worker iterator."""

    def __init__(self, coordinator, name, dataset, info):
        self._coordinator = coordinator
        self.name = name
        self.dataset = dataset
        self.info = info  # {"features": ..., "examples": ...} of the source
        self._ref = _actorps.DatasetRef(name)

    def __iter__(self):
        return self

    def __next__(self):
        raise TypeError("a per-worker dataset is read on the workers: pass it to ClusterCoordinator.schedule "
                        "(e.g. schedule(\"train_step\", args=(it, 10)))")

    def __repr__(self):
        return f"<PerWorkerDataset {self.name!r}>"


class RemoteValue:
    """The future result of a scheduled closure."""

    def __init__(self, value, session=None):
        self._value = value
        self._session = session

    def fetch(self):
        """Waits for the closure and returns its result (a list), or raises
        its error (CancelledError: its coordinator was closed first)."""
        if self._session is not None and self._session.closed and not self._value.ready():
            error = _actorps.CancelledError("the closure's coordinator was closed before it finished")
            error.code, error.exit_code = "cancelled", 1
            raise error
        return self._value.fetch()

    def get(self):
        """The same as fetch (TF's RemoteValue.get)."""
        return self.fetch()

    def ready(self):
        """Whether the result is in."""
        return self._value.ready()


class ClusterCoordinator:
    """Schedules closures on the workers of `strategy`'s cluster:

    >>> coordinator = actorps.ClusterCoordinator(strategy)
    >>> it = iter(coordinator.create_per_worker_dataset(train_data))
    >>> results = [coordinator.schedule("train_step", args=(it, 10)) for _ in range(20)]
    >>> coordinator.join()
    >>> results[0].fetch()   # [loss_sum, correct, examples, steps]

    It connects at the first create_per_worker_dataset: the variables of
    the model created in the strategy's scope (its compiled optimizer,
    else SGD) go onto the PS tasks and a worker starts on each worker node.
    """

    def __init__(self, strategy):
        self.strategy = strategy

    def _connect(self):
        if not self.strategy._models:
            raise ValueError("ClusterCoordinator: create the model inside the strategy's scope() first "
                             "(its variables go onto the PS tasks)")
        model = self.strategy._models[-1]
        self.strategy._connect(model, None, model._training())

    def create_per_worker_dataset(self, dataset_fn):
        """`dataset_fn` (a Dataset, a DatasetCreator, or a function of an
        InputContext returning one) created on every worker, each reading
        its own shard; a PerWorkerDataset."""
        dataset = dataset_of(dataset_fn, "create_per_worker_dataset", self.strategy.num_workers)
        if self.strategy._session is None:
            self._connect()
        name = self.strategy._dataset_name()
        info = self.strategy._session.create_per_worker_dataset(name, dataset._toml("dataset"),
                                                       "<create_per_worker_dataset>")
        return PerWorkerDataset(self, name, dataset, info)

    def _require(self):
        # (the strategy's session, not one of its own: closing the strategy's ends it)
        if self.strategy._session is None:
            if self.strategy._closed_why:
                raise ValueError(f"ClusterCoordinator: its strategy's coordinator is gone: {self.strategy._closed_why} "
                                 "(create_per_worker_dataset connects it again)")
            raise ValueError("ClusterCoordinator: not connected: create a per-worker dataset first")
        return self.strategy._session

    def schedule(self, fn, args=(), kwargs=None, worker=-1):
        """Schedules `fn` (a worker function's name: train_step, noop, ...)
        with `args` (ints, floats, bytes, per-worker datasets) on a free
        worker (or `worker`); a RemoteValue. Blocks while the queue is full."""
        if kwargs:
            raise ValueError("schedule: keyword arguments are not supported (worker functions take positional ones)")
        if not isinstance(fn, str):
            name = getattr(fn, "__name__", None)
            raise ValueError(f"schedule: a Python function ({name or fn!r}) cannot run on the workers; schedule a "
                             f"worker function by name ({', '.join(FUNCTIONS)})")
        values = [a._ref if isinstance(a, PerWorkerDataset) else a for a in args]
        session = self._require()
        return RemoteValue(session.schedule(fn, values, worker, True), session)

    def join(self):
        """Waits until every scheduled closure finished; raises the first
        error since the last join (later closures were cancelled)."""
        self._require().join()

    def done(self):
        """Whether every scheduled closure finished (no wait)."""
        return self._require().done()

    def fetch(self, val):
        """The results of a RemoteValue, or of a list, tuple or dict of them."""
        if isinstance(val, RemoteValue):
            return val.fetch()
        if isinstance(val, (list, tuple)):
            return type(val)(self.fetch(v) for v in val)
        if isinstance(val, dict):
            return {k: self.fetch(v) for k, v in val.items()}
        return val

    @property
    def num_workers(self):
        """Workers of the job (connected or not)."""
        return self._require().num_workers()
