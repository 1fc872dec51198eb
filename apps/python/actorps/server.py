"""``tf.distribute.Server``: one worker or PS node served from this
process, the same as ``actorps node`` (TF_CONFIG's way)."""

from . import _actorps
from . import _toml

__all__ = ["Server"]


class Server:
    """Serves the node of one task of a cluster until its job ends (the
    chief's training finished) or SIGTERM/SIGINT stops it:

    >>> resolver = actorps.cluster_resolver.TFConfigClusterResolver()
    >>> actorps.Server(resolver).join()   # TF_CONFIG's task, e.g. worker:1

    `task_type`/`task_id` override the resolver's; `runtime` is a dict of
    [runtime] keys (config/defaults.toml), e.g. ``{"threads": 1}``.
    """

    def __init__(self, cluster_resolver, task_type=None, task_id=None, runtime=None):
        self.cluster_resolver = cluster_resolver
        self.task_type = task_type if task_type is not None else cluster_resolver.task_type
        self.task_id = task_id if task_id is not None else cluster_resolver.task_id
        self.runtime = dict(getattr(cluster_resolver, "_runtime", {}) or {})
        self.runtime.update(runtime or {})
        if self.task_type is None:
            raise ValueError("Server: no task: give task_type and task_id, or set TF_CONFIG's task")
        tasks = self.tasks()  # checks the cluster now (ValueError when it is bad)
        if self.task_string() not in tasks and self.task_type not in ("chief", "coordinator"):
            raise ValueError(f"Server: the cluster has no task {self.task_string()} (it has {', '.join(tasks)})")

    def _text(self):
        return _toml.table("runtime", self.runtime) if self.runtime else ""

    def task_string(self):
        """This server's task as ROLE:INDEX, e.g. "worker:0"."""
        role = "coordinator" if self.task_type in ("chief", "master") else self.task_type
        return f"{role}:{int(self.task_id or 0)}"

    def tasks(self):
        """Every task of the cluster, as ROLE:INDEX."""
        return _actorps.cluster_tasks(self._text(), "<actorps.Server>", self.cluster_resolver._tf_config())

    def join(self):
        """Serves until the job ends or a signal stops the node; returns the
        exit code ``actorps node`` would exit with (0: the job ended)."""
        return _actorps.serve_node(self._text(), "<actorps.Server>", self.cluster_resolver._tf_config(),
                                   self.task_string())
