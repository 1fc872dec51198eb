"""actorps: TensorFlow 2's parameter-server training (ParameterServerStrategy,
ClusterCoordinator, Keras-style Model.fit) on actorps's C++ actor system.

>>> import actorps
>>> with actorps.testing.local_cluster(num_workers=2, num_ps=2) as resolver:
...     strategy = actorps.ParameterServerStrategy(resolver)
...     with strategy.scope():
...         model = actorps.Model.from_toml("config/seed_cnn.toml")
...     model.compile(optimizer=actorps.optimizers.Adam(0.002))
...     history = model.fit(train, epochs=1, steps_per_epoch=300, validation_data=test)

Names follow TF's: ``actorps.cluster_resolver``, ``actorps.errors``,
``actorps.data.Dataset``, ``actorps.optimizers``, ``actorps.callbacks``,
``actorps.partitioners``, ``actorps.layers`` (Keras's functional API:
``actorps.Model(inputs=x, outputs=logits)``). Bad configuration raises ValueError with the
``actorps`` program's file:line:column text; runtime failures raise
``actorps.errors.OpError`` subclasses.
"""

from . import _actorps
from . import callbacks
from . import cluster_resolver
from . import data
from . import errors
from . import layers
from . import optimizers
from . import partitioners
from . import testing
from .callbacks import Callback, History
from .cluster_resolver import SimpleClusterResolver, TFConfigClusterResolver
from .coordinator import ClusterCoordinator, PerWorkerDataset, RemoteValue
from .data import Dataset
from .model import Model
from .server import Server
from .strategy import ParameterServerStrategy, get_strategy, has_strategy

#: The actorps program this module was built with (``actorps node`` etc.).
ACTORPS_BIN = _actorps.ACTORPS_BIN

__all__ = [
    "ACTORPS_BIN",
    "Callback",
    "ClusterCoordinator",
    "Dataset",
    "History",
    "Model",
    "ParameterServerStrategy",
    "PerWorkerDataset",
    "RemoteValue",
    "Server",
    "SimpleClusterResolver",
    "TFConfigClusterResolver",
    "callbacks",
    "cluster_resolver",
    "data",
    "errors",
    "get_strategy",
    "has_strategy",
    "layers",
    "load_job",
    "optimizers",
    "partitioners",
    "testing",
]


def load_job(path, tf_config: str = "") -> "_actorps.Job":
    """A job file parsed as ``actorps train`` parses it (ValueError when it
    is bad); its .epochs, .steps_per_epoch, .checkpoint_dir, .tasks."""
    return _actorps.load_job(path, tf_config)
