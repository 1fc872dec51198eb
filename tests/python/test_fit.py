"""model.fit on a local cluster (2 workers, 2 PS processes): the main
job's CNN on Fashion-MNIST for a short epoch, with callbacks, then
evaluate, get_weights and export on the same cluster."""

import json
import math
import os
import signal
import threading

import numpy as np
import pytest

import actorps
from conftest import SEED_CNN, test_data, train_data


@pytest.fixture(scope="module")
def cluster():
    with actorps.testing.local_cluster(num_workers=2, num_ps=2) as resolver:
        yield resolver


def test_fit_fashion_mnist(cluster, tmp_path):
    strategy = actorps.ParameterServerStrategy(
        cluster, variable_partitioner=actorps.partitioners.MinSizePartitioner(max_shards=2),
        threads_per_worker=1, pull_ahead=True)
    with strategy.scope():
        model = actorps.Model.from_toml(SEED_CNN)
    model.compile(optimizer=actorps.optimizers.Adam(0.002, learning_rate_decay=0.7),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])

    calls = []

    class Recorder(actorps.Callback):
        def on_train_begin(self, logs=None):
            calls.append("train_begin")

        def on_epoch_begin(self, epoch, logs=None):
            calls.append(f"epoch_begin {epoch}")

        def on_epoch_end(self, epoch, logs=None):
            assert self.model is model
            calls.append(f"epoch_end {epoch} {sorted(logs)}")

        def on_train_end(self, logs=None):
            calls.append("train_end")

    checkpoints, logs = tmp_path / "checkpoints", tmp_path / "logs"
    history = model.fit(train_data(), epochs=2, steps_per_epoch=250, validation_data=test_data(),
                        callbacks=[Recorder(), actorps.callbacks.ModelCheckpoint(checkpoints),
                                   actorps.callbacks.TensorBoard(logs)])
    keys = "['accuracy', 'loss', 'val_accuracy', 'val_loss']"
    assert calls == ["train_begin", "epoch_begin 0", f"epoch_end 0 {keys}", "epoch_begin 1", f"epoch_end 1 {keys}",
                     "train_end"]
    assert isinstance(history, actorps.History) and history is model.history
    assert sorted(history.history) == ["accuracy", "loss", "val_accuracy", "val_loss"]
    assert history.epoch == [0, 1] and all(len(v) == 2 for v in history.history.values())
    assert all(math.isfinite(v) for v in history.history["loss"])
    assert history.history["loss"][1] < history.history["loss"][0]
    accuracy = history.history["val_accuracy"][-1]
    print(f"val_accuracy after 500 steps: {accuracy:.4f}")
    assert accuracy >= 0.80, history.history
    assert os.listdir(checkpoints) and os.path.exists(logs / "metrics.csv")

    # The same variables, evaluated again: the same figures.
    result = model.evaluate(test_data(), return_dict=True)
    assert sorted(result) == ["accuracy", "loss"]
    assert result["accuracy"] == pytest.approx(accuracy, abs=1e-9)
    assert model.evaluate(test_data()) == pytest.approx([result["loss"], result["accuracy"]])  # Keras's list

    weights = model.get_weights()
    assert [w.shape for w in weights] == [(3, 3, 1, 32), (32,), (5408, 64), (64,), (64, 10), (10,)]
    assert all(w.dtype.name == "float32" for w in weights)
    assert model.get_weight_names()[0].startswith("conv2d")

    # set_weights round trip: zeroing the last layer's bias shows in get_weights.
    weights[-1][:] = 0
    model.set_weights(weights)
    assert not model.get_weights()[-1].any()

    out = tmp_path / "model.onnx"
    model.export(out)
    assert out.stat().st_size > 4 * 5408 * 64

    # safetensors: the variables by name, exactly get_weights' values, the step in the metadata.
    st = tmp_path / "model.safetensors"
    model.export(st, format="safetensors")
    raw = st.read_bytes()
    size = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + size])
    assert header["__metadata__"]["step"] == str(history.timing[-1]["step"])
    for name, w in zip(model.get_weight_names(), model.get_weights()):
        begin, end = header[name]["data_offsets"]
        assert header[name]["shape"] == list(w.shape)
        assert (np.frombuffer(raw[8 + size + begin:8 + size + end], dtype="<f4").reshape(w.shape) == w).all()
    with pytest.raises(ValueError, match="expected \"onnx\" or \"safetensors\""):
        model.export(st, format="h5")


def test_a_learning_rate_scheduler_sets_the_shards_rate_each_epoch(cluster):
    # Epoch 0 at the optimizer's rate, then 1e-30 (a shard refuses 0): Adam's
    # steps are then below half a float32 ulp of every weight, so the
    # weights after epoch 0 are the final ones.
    strategy = actorps.ParameterServerStrategy(cluster, threads_per_worker=1)
    with strategy.scope():
        model = actorps.Model.from_toml(SEED_CNN)
    model.compile(optimizer=actorps.optimizers.Adam(0.002))
    rates, after_first = [], []

    class Snapshot(actorps.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if epoch == 0:
                after_first.extend(w.copy() for w in self.model.get_weights())

    def schedule(epoch, lr):
        rates.append(lr)
        return lr if epoch == 0 else 1e-30

    initial = [w.copy() for w in model.get_weights()]
    model.fit(train_data(), epochs=3, steps_per_epoch=40, verbose=0,
              callbacks=[actorps.callbacks.LearningRateScheduler(schedule), Snapshot()])
    assert rates == [pytest.approx(0.002), pytest.approx(0.002), 1e-30]
    final = model.get_weights()
    assert any((a != b).any() for a, b in zip(after_first, initial))  # epoch 0 trained
    assert all((a == b).all() for a, b in zip(after_first, final))  # epochs 1 and 2 moved nothing


def test_ctrl_c_writes_a_checkpoint_and_a_rerun_resumes(tmp_path, capfd):
    backup = tmp_path / "backup"
    timers = []

    class InterruptSoon(actorps.Callback):
        def on_epoch_begin(self, epoch, logs=None):  # Ctrl-C half a second into training
            timers.append(threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)))
            timers[-1].start()

    def fit(callbacks, epochs):
        strategy = actorps.ParameterServerStrategy(resolver, threads_per_worker=1)
        with strategy.scope():
            model = actorps.Model.from_toml(SEED_CNN)
        model.compile(actorps.optimizers.Adam(0.002))
        return model.fit(train_data(), epochs=epochs, steps_per_epoch=400,
                         callbacks=[actorps.callbacks.BackupAndRestore(backup)] + callbacks)

    with actorps.testing.local_cluster(num_workers=2, num_ps=1) as resolver:
        try:
            with pytest.raises(KeyboardInterrupt) as interrupted:  # (its traceback keeps that strategy alive)
                fit([InterruptSoon()], epochs=5)
        finally:
            for t in timers:
                t.cancel()
        saved = [f for f in os.listdir(backup) if f.startswith("ckpt-")]
        assert len(saved) == 1, os.listdir(backup)
        step = int(saved[0].split("-")[1].split(".")[0])
        assert 0 < step < 400
        capfd.readouterr()

        class StopAtOnce(actorps.Callback):  # the rerun: one epoch's rest, then stop
            def on_epoch_end(self, epoch, logs=None):
                self.model.stop_training = True

        # A new strategy on the same nodes: the interrupted one's coordinator lets go first.
        with pytest.warns(UserWarning, match="let go of its cluster"):
            history = fit([StopAtOnce()], epochs=5)
        del interrupted
        out, err = capfd.readouterr()
        assert f"restored the checkpoint of step {step} (epoch 0)" in out + err
        assert history.epoch == [0]
