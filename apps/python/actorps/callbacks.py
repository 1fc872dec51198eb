"""Keras callbacks at epoch level, as ``tf.keras.callbacks`` under
ParameterServerStrategy (which has no batch-level callbacks either).
Python callbacks hear each epoch's begin and end; the built-in ones are
actorps's own, run by the coordinator ([training] keys): ModelCheckpoint
and BackupAndRestore (checkpoint_dir), TensorBoard (log_dir) and
EarlyStopping (early_stopping_*)."""

import os

__all__ = ["Callback", "CallbackList", "History", "ModelCheckpoint", "BackupAndRestore", "TensorBoard",
           "EarlyStopping", "LearningRateScheduler"]

_BATCH_HOOKS = ("on_batch_begin", "on_batch_end", "on_train_batch_begin", "on_train_batch_end",
                "on_test_batch_begin", "on_test_batch_end", "on_predict_batch_begin", "on_predict_batch_end")


class Callback:
    """The base of Python callbacks: override on_train_begin, on_epoch_begin,
    on_epoch_end, on_train_end (epochs count from 0, as in Keras; `logs`
    holds loss, accuracy and, with validation data, val_loss and
    val_accuracy). `self.model` is the model being trained; setting
    ``self.model.stop_training = True`` ends training after this epoch.
    Batch-level hooks are refused, as TF refuses them under
    ParameterServerStrategy."""

    def __init__(self):
        self.model = None
        self.params = {}

    def set_model(self, model):
        """Called by fit before training."""
        self.model = model

    def set_params(self, params):
        """Called by fit before training: epochs, steps."""
        self.params = params

    def on_train_begin(self, logs=None):
        """Before the first epoch."""

    def on_train_end(self, logs=None):
        """After the last epoch (or the one that stopped training)."""

    def on_epoch_begin(self, epoch, logs=None):
        """Before epoch `epoch` (from 0)."""

    def on_epoch_end(self, epoch, logs=None):
        """After epoch `epoch` and its evaluation."""

    # Batch-level hooks: never called; overriding one is an error (see CallbackList).
    def on_batch_begin(self, batch, logs=None):
        """Not supported in parameter-server training."""

    def on_batch_end(self, batch, logs=None):
        """Not supported in parameter-server training."""

    def on_train_batch_begin(self, batch, logs=None):
        """Not supported in parameter-server training."""

    def on_train_batch_end(self, batch, logs=None):
        """Not supported in parameter-server training."""

    def on_test_batch_begin(self, batch, logs=None):
        """Not supported in parameter-server training."""

    def on_test_batch_end(self, batch, logs=None):
        """Not supported in parameter-server training."""

    def on_predict_batch_begin(self, batch, logs=None):
        """Not supported in parameter-server training."""

    def on_predict_batch_end(self, batch, logs=None):
        """Not supported in parameter-server training."""

    def _training(self):
        """The [training] keys this callback sets (actorps's built-ins)."""
        return {}


class History(Callback):
    """What fit returns: `history` maps each metric (loss, accuracy,
    val_loss, val_accuracy, ...) to its value per epoch; `epoch` lists the
    epochs (from 0)."""

    def __init__(self):
        super().__init__()
        self.history = {}
        self.epoch = []
        self.timing = []  # per epoch: {"step": the job's steps so far, "seconds": the epoch's training time}

    def on_train_begin(self, logs=None):
        self.epoch = []
        self.timing = []

    def on_epoch_end(self, epoch, logs=None):
        self.epoch.append(epoch)
        for k, v in (logs or {}).items():
            self.history.setdefault(k, []).append(v)


class ModelCheckpoint(Callback):
    """Checkpoints of the variables in the directory `filepath`, written by
    the coordinator after each epoch (`save_freq` "epoch") or also every
    `save_freq` steps (an int), the newest `max_to_keep` kept
    ([training] checkpoint_dir, checkpoint_steps, checkpoint_keep). A
    later fit with the same directory resumes from the newest one, as
    BackupAndRestore does: actorps's checkpoints are one kind."""

    def __init__(self, filepath, save_freq="epoch", max_to_keep=3):
        super().__init__()
        self.filepath = os.fspath(filepath)
        self.save_freq = save_freq
        self.max_to_keep = max_to_keep

    def _training(self):
        keys = {"checkpoint_dir": self.filepath, "checkpoint_keep": int(self.max_to_keep)}
        if self.save_freq != "epoch":
            if not isinstance(self.save_freq, int) or self.save_freq <= 0:
                raise ValueError(f"save_freq: expected \"epoch\" or a number of steps > 0, got {self.save_freq!r}")
            keys["checkpoint_steps"] = self.save_freq
        return keys


class BackupAndRestore(ModelCheckpoint):
    """TF's BackupAndRestore: a checkpoint in `backup_dir` after each epoch
    (or every `save_freq` steps), restored when fit starts, so a rerun
    resumes where an interrupted one stopped (mid-epoch included);
    Ctrl-C during fit writes one before raising KeyboardInterrupt."""

    def __init__(self, backup_dir, save_freq="epoch", delete_checkpoint=False):
        super().__init__(backup_dir, save_freq=save_freq)
        self.backup_dir = self.filepath
        if delete_checkpoint:
            raise ValueError("BackupAndRestore(delete_checkpoint=True) is not supported: actorps keeps the "
                             "checkpoints (their FINAL mark says training ended)")


class TensorBoard(Callback):
    """TensorBoard events and metrics.csv in `log_dir`, per epoch
    ([training] log_dir; train/loss, train/accuracy, test/loss, test/accuracy)."""

    def __init__(self, log_dir="logs"):
        super().__init__()
        self.log_dir = os.fspath(log_dir)

    def _training(self):
        return {"log_dir": self.log_dir}


_MONITORS = {"val_loss": "test_loss", "val_accuracy": "test_accuracy", "loss": "train_loss"}


class EarlyStopping(Callback):
    """Stops training when `monitor` ("val_loss", "val_accuracy" or "loss")
    has not improved by more than `min_delta` for `patience` epochs
    ([training] early_stopping_*; val_* need validation data)."""

    def __init__(self, monitor="val_loss", min_delta=0.0, patience=0, restore_best_weights=False):
        super().__init__()
        if monitor not in _MONITORS:
            raise ValueError(f"EarlyStopping: monitor {monitor!r} is not supported (expected one of "
                             f"{', '.join(_MONITORS)})")
        if restore_best_weights:
            raise ValueError("EarlyStopping(restore_best_weights=True) is not supported")
        self.monitor = monitor
        self.min_delta = min_delta
        self.patience = patience

    def _training(self):
        # Keras stops after `patience` epochs without improvement, at the
        # first when patience is 0; actorps's 0 means off.
        return {"early_stopping_monitor": _MONITORS[self.monitor],
                "early_stopping_min_delta": float(abs(self.min_delta)),
                "early_stopping_patience": max(1, int(self.patience))}


class LearningRateScheduler(Callback):
    """Keras's: at the start of each epoch (from 0), `schedule(epoch, lr)`
    gives the learning rate every PS shard applies from then on; `lr` is
    the rate before it (the optimizer's at the first epoch). It overrides
    the optimizer's own `learning_rate_decay` for the epochs it sets."""

    def __init__(self, schedule, verbose=0):
        super().__init__()
        if not callable(schedule):
            raise TypeError(f"LearningRateScheduler: schedule must be callable, got {type(schedule).__name__}")
        self.schedule = schedule
        self.verbose = verbose
        self._lr = None

    def on_train_begin(self, logs=None):
        self._lr = None

    def on_epoch_begin(self, epoch, logs=None):
        lr = self._lr if self._lr is not None else self.model.optimizer.learning_rate
        new = float(self.schedule(epoch, lr))
        self.model._session().set_learning_rate(new)
        self._lr = new
        if self.verbose:
            print(f"Epoch {epoch + 1}: LearningRateScheduler setting learning rate to {new}.")


def _overridden_batch_hooks(cb):
    return [h for h in _BATCH_HOOKS if getattr(type(cb), h, None) is not getattr(Callback, h)]


class CallbackList:
    """The callbacks of one fit, in order, as the C++ fit calls them
    (`on_epoch_begin(epoch)`, `on_epoch_end(epoch, logs) -> stop`); also
    the [training] keys of the built-in ones. ValueError for a callback
    with batch-level hooks, or two that disagree on a key."""

    def __init__(self, callbacks=None, model=None, add_history=True, params=None):
        self.callbacks = list(callbacks or [])
        for cb in self.callbacks:
            if not isinstance(cb, Callback):
                raise TypeError(f"callbacks: expected actorps.callbacks.Callback objects, got {type(cb).__name__}")
            hooks = _overridden_batch_hooks(cb)
            if hooks:
                raise ValueError("batch-level callbacks are not supported in parameter-server training: "
                                 f"{type(cb).__name__} overrides {', '.join(hooks)}")
        self.history = None
        if add_history:
            self.history = History()
            self.callbacks.append(self.history)
        self.model = model
        for cb in self.callbacks:
            cb.set_model(model)
            cb.set_params(dict(params or {}))

    def _training(self):
        keys = {}
        for cb in self.callbacks:
            for k, v in cb._training().items():
                if k in keys and keys[k] != v:
                    raise ValueError(f"callbacks: two callbacks set [training] {k} differently ({keys[k]!r}, {v!r})")
                keys[k] = v
        return keys

    def on_train_begin(self, logs=None):
        """Calls each callback's on_train_begin."""
        for cb in self.callbacks:
            cb.on_train_begin(logs)

    def on_train_end(self, logs=None):
        """Calls each callback's on_train_end."""
        for cb in self.callbacks:
            cb.on_train_end(logs)

    def on_epoch_begin(self, epoch, logs=None):
        """Calls each callback's on_epoch_begin."""
        for cb in self.callbacks:
            cb.on_epoch_begin(epoch, logs)

    def on_epoch_end(self, epoch, logs=None):
        """Calls each callback's on_epoch_end with Keras's logs; whether
        training should stop (the model's stop_training)."""
        if self.history is not None and logs:
            self.history.timing.append({"step": logs["step"], "seconds": logs["seconds"]})
        logs = keras_logs(logs)
        for cb in self.callbacks:
            cb.on_epoch_end(epoch, logs)
        return bool(getattr(self.model, "stop_training", False))

    def __iter__(self):
        return iter(self.callbacks)


_LOG_KEYS = ("loss", "accuracy", "val_loss", "val_accuracy", "val_auc", "val_log_loss")


def keras_logs(logs):
    """The metrics of an epoch's logs (what Keras passes to on_epoch_end)."""
    return {k: logs[k] for k in _LOG_KEYS if logs and k in logs}
