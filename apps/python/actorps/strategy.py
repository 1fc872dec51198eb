"""``tf.distribute.experimental.ParameterServerStrategy``: the cluster, how
variables are sharded over the PS tasks and how updates apply. Models
created in its `scope()` train on its cluster (`Model.fit`), and a
`ClusterCoordinator` schedules closures on its workers."""

import contextlib
import re
import threading
import warnings
import weakref

from . import _actorps
from . import _toml
from .partitioners import Partitioner

__all__ = ["ParameterServerStrategy", "get_strategy", "has_strategy"]

_scopes = threading.local()
_connected = weakref.WeakValueDictionary()  # cluster (its worker and PS addresses) -> the strategy connected to it

_CONSISTENCY = ("async", "sync", "bounded_staleness")
_DEVICES = ("auto", "cpu", "cuda")


class ParameterServerStrategy:
    """Parameter-server training on the cluster of `cluster_resolver`:

    >>> strategy = actorps.ParameterServerStrategy(resolver,
    ...     variable_partitioner=actorps.partitioners.MinSizePartitioner(max_shards=2))
    >>> with strategy.scope():
    ...     model = actorps.Model.from_toml("config/seed_cnn.toml")

    The keyword arguments are [training] keys (config/README.md):
    `consistency` ("async", "sync" or "bounded_staleness" with `staleness`),
    `ps_replicas` (2: every shard has a backup), `device` ("auto", "cpu",
    "cuda"), `threads_per_worker` (CPU kernel threads; 0: all cores),
    `devices_per_worker`, `pull_ahead`, `min_workers`,
    `replicas_to_aggregate` (sync), `seed` (the variables' initializers);
    `runtime` is a dict of [runtime] keys for this process's actor system
    (config/defaults.toml), e.g. ``{"threads": 1}``.
    """

    def __init__(self, cluster_resolver, variable_partitioner=None, consistency="async", ps_replicas=1,
                 device="auto", threads_per_worker=0, runtime=None, staleness=None, replicas_to_aggregate=None,
                 pull_ahead=None, devices_per_worker=None, min_workers=None, seed=None):
        if cluster_resolver is None:
            raise ValueError("ParameterServerStrategy needs a cluster_resolver (SimpleClusterResolver, "
                             "TFConfigClusterResolver or actorps.testing.local_cluster's)")
        if variable_partitioner is not None and not isinstance(variable_partitioner, Partitioner):
            raise TypeError("variable_partitioner: expected an actorps.partitioners partitioner, got "
                            f"{type(variable_partitioner).__name__}")
        if consistency not in _CONSISTENCY:
            raise ValueError(f"consistency: expected one of {', '.join(_CONSISTENCY)}, got {consistency!r}")
        if device not in _DEVICES:
            raise ValueError(f"device: expected one of {', '.join(_DEVICES)}, got {device!r}")
        self.cluster_resolver = cluster_resolver
        self.variable_partitioner = variable_partitioner
        self.consistency = consistency
        self.ps_replicas = ps_replicas
        self.device = device
        self.threads_per_worker = threads_per_worker
        self.runtime = dict(runtime or {})
        self._extra = {"staleness": staleness, "replicas_to_aggregate": replicas_to_aggregate,
                       "pull_ahead": pull_ahead, "devices_per_worker": devices_per_worker,
                       "min_workers": min_workers, "seed": seed}
        self._model_refs = []  # the models of its scope (weak: a model holds its strategy, not the reverse)
        self._session = None  # the coordinator connected to the cluster (one per strategy, as in TF)
        self._session_model_ref = None
        self._session_optimizer = None
        self._closed_why = None  # why a session this strategy had is gone
        self._datasets = 0

    # -- scope -----------------------------------------------------------
    @contextlib.contextmanager
    def scope(self):
        """A context in which created models belong to this strategy."""
        stack = _stack()
        stack.append(self)
        try:
            yield self
        finally:
            stack.pop()

    @property
    def num_workers(self):
        """How many worker tasks the cluster has."""
        return len(self.cluster_resolver.cluster_spec().get("worker", []))

    @property
    def num_ps(self):
        """How many ps tasks the cluster has."""
        return len(self.cluster_resolver.cluster_spec().get("ps", []))

    @property
    def num_replicas_in_sync(self):
        """As TF's ParameterServerStrategy: 1 (each worker steps on its own)."""
        return 1

    # -- the job ---------------------------------------------------------
    def _training(self):
        keys = {"consistency": self.consistency, "ps_replicas": self.ps_replicas, "device": self.device,
                "threads_per_worker": self.threads_per_worker}
        if self.variable_partitioner is not None:
            keys.update(self.variable_partitioner._training())
        keys.update({k: v for k, v in self._extra.items() if v is not None})
        return keys

    def _runtime(self):
        keys = dict(getattr(self.cluster_resolver, "_runtime", {}) or {})
        keys.update(self.runtime)
        return keys

    def _job_text(self, model, dataset=None, eval_dataset=None, training=None):
        """The job's TOML text: [runtime], [model], [dataset], [eval_dataset]
        and [training] (the cluster comes from the resolver's TF_CONFIG)."""
        keys = self._training()
        keys.update(model._training())
        keys.update(training or {})
        runtime = self._runtime()
        return _toml.document(
            _toml.table("runtime", runtime) if runtime else "",
            model._toml(),
            dataset._toml("dataset") if dataset is not None else "",
            eval_dataset._toml("eval_dataset") if eval_dataset is not None else "",
            _toml.table("training", keys),
        )

    def _parse(self, text, source="<actorps job>"):
        """The job of `text` (ValueError with the loader's file:line:column
        text when it is bad, and the line of the generated text it names)."""
        try:
            return _actorps.parse_job(text, source, self.cluster_resolver._tf_config())
        except ValueError as e:
            m = re.match(re.escape(source) + r":(\d+):", str(e))
            lines = text.splitlines()
            if m and 0 < int(m.group(1)) <= len(lines):
                raise ValueError(f"{e}\n  (line {m.group(1)} of the job Python wrote: "
                                 f"{lines[int(m.group(1)) - 1].strip()})") from None
            raise

    def _connect(self, model, dataset=None, training=None, job=None):
        """This strategy's session, connected now when it is not yet: the
        variables of `model` on the PS tasks, a worker on each worker node
        and `dataset` as each worker's "train" dataset (None: none), or
        those of `job` (parsed); and whether it was connected now."""
        if self._session is not None:
            if self._session_model is not model:  # (None: its model is gone)
                raise ValueError("this strategy's cluster already trains another model: one model per "
                                 "ParameterServerStrategy (create another strategy for another model)")
            if model._optimizer_keys() != self._session_optimizer:
                raise ValueError(f"{model.name}: its variables were created on the PS tasks with "
                                 f"{self._session_optimizer}; the shards cannot change to {model._optimizer_keys()} "
                                 "(compile before the first fit, or use another strategy and cluster)")
            return self._session, False
        if job is None:
            training = dict(training or {})
            training.setdefault("steps_per_epoch", 1)  # (required by the loader; fit gives its own)
            job = self._parse(self._job_text(model, dataset, None, training))
        # One coordinator per cluster in this process: an older strategy's
        # session on these nodes lets go first (the nodes take the newest
        # coordinator's workers; two would replace each other's).
        key = self._cluster_key()
        older = _connected.get(key)
        if older is not None and older is not self:
            warnings.warn(f"{older!r} let go of its cluster: another strategy connects to it", stacklevel=3)
            older._close(why="it let go of its cluster: another strategy connected to it")
        self._session = _actorps.Session.connect(job)
        _connected[key] = self
        self._session_model_ref = weakref.ref(model)
        self._session_optimizer = model._optimizer_keys()
        if model._pending_weights is not None:
            self._session.set_weights(model._pending_weights)
            model._pending_weights = None
        return self._session, True

    @property
    def _models(self):
        """The live models created in this strategy's scope, oldest first."""
        return [m for m in (r() for r in self._model_refs) if m is not None]

    @property
    def _session_model(self):
        return self._session_model_ref() if self._session_model_ref is not None else None

    def _cluster_key(self):
        spec = self.cluster_resolver.cluster_spec()
        return tuple(sorted((role, tuple(spec[role])) for role in spec if role in ("worker", "ps", "standby")))

    def _dataset_name(self):
        self._datasets += 1
        return f"dataset_{self._datasets}"

    def end_job(self, reason="the Python coordinator ended the job"):
        """actorps's own (TF has none): stops every node of the cluster, as
        ``actorps train`` does when training ends (each node exits 0, a
        worker after draining). The strategy's models cannot train after."""
        if self._session is None:
            raise ValueError("end_job: this strategy has not connected to its cluster")
        self._close(end_job=True, reason=reason)

    def _close(self, end_job=False, reason="the Python coordinator ended the job", why="it was closed"):
        """Closes this strategy's session (with `end_job`, its nodes exit
        first); the nodes stay for a later coordinator."""
        s, self._session, self._session_model_ref = self._session, None, None
        if s is not None:
            self._closed_why = "the job ended" if end_job else why
        if _connected.get(self._cluster_key()) is self:
            del _connected[self._cluster_key()]
        if s is not None:
            if end_job:
                s.end_job(reason)
            s.close()  # now, whatever still holds it (a traceback's frame, a RemoteValue)

    def __repr__(self):
        return f"ParameterServerStrategy({self.cluster_resolver!r}, consistency={self.consistency!r})"


def _release(cluster_spec):
    """Closes the session of whichever strategy is connected to the cluster
    of `cluster_spec` (before its nodes stop: actorps.testing)."""
    key = tuple(sorted((role, tuple(a)) for role, a in cluster_spec.items() if role in ("worker", "ps", "standby")))
    strategy = _connected.get(key)
    if strategy is not None:
        strategy._close()


def _stack():
    if not hasattr(_scopes, "stack"):
        _scopes.stack = []
    return _scopes.stack


def get_strategy():
    """The strategy whose scope() this code runs in, or None."""
    stack = _stack()
    return stack[-1] if stack else None


def has_strategy():
    """Whether this code runs in a strategy's scope()."""
    return bool(_stack())
