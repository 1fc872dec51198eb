"""Cluster resolvers, as ``tf.distribute.cluster_resolver``: where the
chief, workers and PS tasks are, and which task this process is."""

import json
import os

__all__ = ["ClusterResolver", "SimpleClusterResolver", "TFConfigClusterResolver"]

_ROLES = ("chief", "coordinator", "master", "worker", "ps", "standby")


class ClusterResolver:
    """The base: `cluster_spec()` (a dict role -> ["host:port", ...]),
    `task_type` and `task_id`. The cluster reaches the C++ loader as
    TF_CONFIG's JSON (`_tf_config()`), so its errors name JSON paths."""

    task_type = None
    task_id = None

    def cluster_spec(self):
        """The cluster as a dict: role -> list of "host:port"."""
        raise NotImplementedError

    def num_workers(self):
        """How many worker tasks the cluster has."""
        return len(self.cluster_spec().get("worker", []))

    def num_ps(self):
        """How many ps tasks the cluster has."""
        return len(self.cluster_spec().get("ps", []))

    def _tf_config(self):
        """TF_CONFIG's JSON text of this cluster and task (the task is left
        out when the cluster does not list it: a chief outside the cluster)."""
        spec = self.cluster_spec()
        doc = {"cluster": spec}
        if self.task_type is not None and (self.task_type == "evaluator" or self.task_type in spec):
            doc["task"] = {"type": self.task_type, "index": int(self.task_id or 0)}
        return json.dumps(doc)


def _as_dict(cluster_spec):
    if hasattr(cluster_spec, "as_dict"):  # a tf.train.ClusterSpec-like object
        cluster_spec = cluster_spec.as_dict()
    if not isinstance(cluster_spec, dict):
        raise TypeError(f"cluster_spec: expected a dict role -> ['host:port', ...], got {type(cluster_spec).__name__}")
    out = {}
    for role, addresses in cluster_spec.items():
        if isinstance(addresses, dict):  # {index: address}, as tf.train.ClusterSpec allows
            addresses = [addresses[i] for i in sorted(addresses)]
        if isinstance(addresses, str):
            addresses = [addresses]
        out[str(role)] = [str(a) for a in addresses]
    return out


class SimpleClusterResolver(ClusterResolver):
    """A cluster given in code, as ``tf.distribute.cluster_resolver.SimpleClusterResolver``:

    >>> SimpleClusterResolver({"chief": ["127.0.0.1:5000"], "worker": ["127.0.0.1:5001"],
    ...                        "ps": ["127.0.0.1:5002"]}, task_type="chief", task_id=0)

    A cluster without a chief is valid: the coordinator (this process) then
    runs outside it on a free local port, as in TF.
    """

    def __init__(self, cluster_spec, task_type="chief", task_id=0, rpc_layer=None):
        self._spec = _as_dict(cluster_spec)
        self.task_type = task_type
        self.task_id = task_id
        self.rpc_layer = rpc_layer
        self._runtime = {}  # [runtime] defaults the cluster suggests (actorps.testing.local_cluster: threads = 1)

    def cluster_spec(self):
        """The cluster as a dict: role -> list of "host:port"."""
        return {role: list(addresses) for role, addresses in self._spec.items()}

    def __repr__(self):
        return f"SimpleClusterResolver({self._spec!r}, task_type={self.task_type!r}, task_id={self.task_id!r})"


class TFConfigClusterResolver(ClusterResolver):
    """The cluster and task of the ``TF_CONFIG`` environment variable, as
    ``tf.distribute.cluster_resolver.TFConfigClusterResolver``. Read when
    asked, so a changed TF_CONFIG is seen; its JSON is handed to the C++
    loader as it is (errors name its paths: ``TF_CONFIG: $.cluster.worker[1]``)."""

    def __init__(self, task_type=None, task_id=None, rpc_layer=None, environment=None):
        self._task_type = task_type
        self._task_id = task_id
        self.rpc_layer = rpc_layer
        self.environment = environment
        self._runtime = {}

    @staticmethod
    def _env_text():
        return os.environ.get("TF_CONFIG", "")

    def _env(self):
        text = self._env_text()
        if not text.strip():
            return {}
        try:
            doc = json.loads(text)
        except ValueError as e:
            raise ValueError(f"TF_CONFIG: $: malformed JSON: {e}") from None
        return doc if isinstance(doc, dict) else {}

    @property
    def task_type(self):
        """TF_CONFIG's task type (or the one given), e.g. "worker"; None when unset."""
        if self._task_type is not None:
            return self._task_type
        return (self._env().get("task") or {}).get("type")

    @task_type.setter
    def task_type(self, value):
        self._task_type = value

    @property
    def task_id(self):
        """TF_CONFIG's task index (or the one given); None when unset."""
        if self._task_id is not None:
            return self._task_id
        task = self._env().get("task") or {}
        return task.get("index", 0) if "type" in task else None

    @task_id.setter
    def task_id(self, value):
        self._task_id = value

    def cluster_spec(self):
        """TF_CONFIG's cluster as a dict ({} when TF_CONFIG is unset)."""
        cluster = self._env().get("cluster") or {}
        return _as_dict(cluster) if isinstance(cluster, dict) else {}

    def _tf_config(self):
        text = self._env_text()
        if not text.strip():
            raise ValueError("TF_CONFIG is not set: TFConfigClusterResolver has no cluster")
        if self._task_type is None and self._task_id is None:
            return text  # as given: the loader's errors name its JSON paths
        doc = self._env()
        doc["task"] = {"type": self.task_type, "index": int(self.task_id or 0)}
        return json.dumps(doc)

    def __repr__(self):
        return f"TFConfigClusterResolver(task_type={self.task_type!r}, task_id={self.task_id!r})"
