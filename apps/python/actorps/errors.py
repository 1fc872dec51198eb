"""actorps's errors as Python exceptions, named as ``tf.errors`` names them.

Bad configuration (a job's TOML, TF_CONFIG, an argument) raises
``ValueError`` with the ``actorps`` program's text (file:line:column or the
JSON path, the field, what was expected). Everything else raises an
``OpError`` (a ``RuntimeError``) subclass with ``code`` (the actorps error
name) and ``exit_code`` (what the program would exit with; 128 and above:
retrying may help).
"""

from ._actorps import (
    AbortedError,
    CancelledError,
    DataLossError,
    DeadlineExceededError,
    FailedPreconditionError,
    InternalError,
    OpError,
    OutOfRangeError,
    PermissionDeniedError,
    ResourceExhaustedError,
    UnavailableError,
)

__all__ = [
    "OpError",
    "AbortedError",
    "CancelledError",
    "DataLossError",
    "DeadlineExceededError",
    "FailedPreconditionError",
    "InternalError",
    "OutOfRangeError",
    "PermissionDeniedError",
    "ResourceExhaustedError",
    "UnavailableError",
]
