"""Types of actorps._actorps, the pybind11 module of apps/python/*.cpp
(module.cpp, py_errors.cpp, py_job.cpp, py_session.cpp, py_fit.cpp)."""

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

#: The actorps program this module was built with.
ACTORPS_BIN: str

# ---- py_errors.cpp: TF's error classes (actorps.errors re-exports them) ----
class OpError(RuntimeError):
    """An actorps operation failed."""

    code: str  # the error's name (messages/errors.hpp)
    exit_code: int  # what the CLI would exit with (128 and above: retrying may help)

class UnavailableError(OpError): ...
class DeadlineExceededError(OpError): ...
class CancelledError(OpError): ...
class OutOfRangeError(OpError): ...
class ResourceExhaustedError(OpError): ...
class PermissionDeniedError(OpError): ...
class FailedPreconditionError(OpError): ...
class DataLossError(OpError): ...
class AbortedError(OpError): ...
class InternalError(OpError): ...

# ---- py_job.cpp ----------------------------------------------------------
class Job:
    """A parsed training job: topology, model, datasets and [training]."""

    @property
    def epochs(self) -> int: ...
    @property
    def steps_per_epoch(self) -> int: ...
    @property
    def checkpoint_dir(self) -> str: ...
    @property
    def tasks(self) -> list[str]:
        """Every task of the topology, as ROLE:INDEX."""
    def initial_weights(self) -> dict[str, npt.NDArray[np.float32]]:
        """The variables' starting values by name (an ONNX file's, else drawn from [training] seed)."""

def parse_job(text: str, source: str, tf_config: str = "") -> Job:
    """Parses a job's TOML text (`source` names it in errors); with `tf_config`, the cluster is TF_CONFIG's."""

def load_job(path: str, tf_config: str = "") -> Job:
    """Loads a job file as `actorps train` does."""

def cluster_tasks(text: str, source: str, tf_config: str = "") -> list[str]:
    """The tasks of a topology (TOML text, or TF_CONFIG with the text's [runtime])."""

def serve_node(text: str, source: str, tf_config: str, task: str, join: str = "") -> int:
    """Serves one node until its job ends or SIGTERM/SIGINT stops it; the exit code."""

# ---- py_session.cpp --------------------------------------------------------
class DatasetRef:
    """A per-worker dataset, by name, as a closure argument."""

    def __init__(self, arg0: str) -> None: ...
    @property
    def name(self) -> str: ...

#: A closure argument: an int (bool), float, bytes or a per-worker dataset.
_Arg = int | float | bytes | DatasetRef

class RemoteValue:
    """The future result of a scheduled closure."""

    def ready(self) -> bool: ...
    def fetch(self) -> list[int | float | bytes | None]:
        """Blocks until the closure finished; its values (raises its OpError)."""

class _Dispatch(Protocol):
    """What Session.fit calls each epoch (actorps.callbacks.CallbackList)."""

    def on_epoch_begin(self, epoch: int) -> Any: ...
    def on_epoch_end(self, epoch: int, logs: dict[str, Any]) -> bool: ...

class Session:
    """A coordinator connected to a job's nodes."""

    @staticmethod
    def connect(job: Job) -> Session: ...
    def create_per_worker_dataset(self, name: str, text: str, source: str, whole: bool = False) -> dict[str, int]:
        """Makes dataset `name` ([dataset] TOML text) on every worker; {"features", "examples"}."""
    def schedule(self, function: str, args: Sequence[_Arg], worker: int = -1,
                 want_result: bool = True) -> RemoteValue: ...
    def join(self) -> None: ...
    def done(self) -> bool: ...
    def num_workers(self) -> int: ...
    def live_workers(self) -> int: ...
    def get_weights(self) -> dict[str, npt.NDArray[np.float32]]: ...
    def set_weights(self, weights: dict[str, npt.ArrayLike]) -> None: ...
    def set_learning_rate(self, learning_rate: float) -> None: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    def end_job(self, arg0: str) -> None: ...
    # py_fit.cpp
    def fit(self, job: Job, dispatch: _Dispatch, verbose: bool = True) -> list[dict[str, Any]]:
        """Trains `job` (its [training]); `dispatch` hears each epoch; the history."""
    def evaluate(self, text: str, source: str, parts: int = 0) -> dict[str, float]:
        """Evaluates on a [dataset] table's data."""
    def export_onnx(self, path: str) -> None:
        """Writes the model with its current values as ONNX."""
    def export_safetensors(self, path: str, step: int = 0, epoch: int = 0) -> None:
        """Writes the variables' current values as safetensors."""
