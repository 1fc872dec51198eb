"""Bad configuration raises ValueError with the actorps program's text
(file:line:column or TF_CONFIG's JSON path, the field, what was
expected), before anything connects; refused features say so."""

import json

import pytest

import actorps
from conftest import SEED_CNN

# Nothing listens here: these tests never get as far as connecting.
CLUSTER = {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2", "127.0.0.1:3"], "ps": ["127.0.0.1:4"]}


def _model(strategy):
    with strategy.scope():
        return actorps.Model.from_toml(SEED_CNN)


def _data():
    return actorps.Dataset.from_synthetic(1000, 784, 10).repeat().batch(32)


def test_parse_job_names_file_line_and_field():
    text = ('[model]\ninput = [1, 1, 4]\n[[model.layers]]\ntype = "dense"\nunits = 2\n'
            '[training]\nsteps_per_epoch = 0\n')
    with pytest.raises(ValueError) as e:
        actorps._actorps.parse_job(text, "bad.toml", json.dumps({"cluster": CLUSTER}))
    assert "bad.toml:7:" in str(e.value) and "training.steps_per_epoch" in str(e.value), str(e.value)
    # [dataset] and [eval_dataset] may be left out (Python brings its own): the rest is a job.
    job = actorps._actorps.parse_job(text.replace("= 0", "= 5"), "ok.toml", json.dumps({"cluster": CLUSTER}))
    assert job.steps_per_epoch == 5 and job.tasks == ["coordinator:0", "worker:0", "worker:1", "ps:0"]


def test_fit_with_a_bad_learning_rate():
    strategy = actorps.ParameterServerStrategy(actorps.SimpleClusterResolver(CLUSTER))
    model = _model(strategy)
    model.compile(optimizer=actorps.optimizers.SGD(learning_rate=-1.0))
    # The generated job's file:line:column and field, then that line of it.
    expected = r"<seed_cnn.fit>:\d+:\d+: training\.learning_rate: expected a number > 0\n.*: learning_rate = -1\.0\)"
    with pytest.raises(ValueError, match=expected):
        model.fit(_data(), epochs=1, steps_per_epoch=10)


def test_bad_dataset_op_and_model_layer():
    strategy = actorps.ParameterServerStrategy(actorps.SimpleClusterResolver(CLUSTER))
    model = _model(strategy)
    with pytest.raises(ValueError, match=r"dataset\.ops\[0\]\.size"):
        model.fit(actorps.Dataset.from_synthetic(10, 784, 10).batch(0), steps_per_epoch=1)
    with strategy.scope():
        bad = actorps.Model.from_config({"input": [2, 2, 1], "layers": [{"type": "dense", "units": 0}]})
    with pytest.raises(ValueError, match=r"model\.layers\[0\]"):
        bad.fit(_data(), steps_per_epoch=1)


def test_bad_tf_config_names_its_json_path(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["127.0.0.1:2"], "stanby": ["127.0.0.1:5"]}}))
    strategy = actorps.ParameterServerStrategy(actorps.TFConfigClusterResolver())
    with pytest.raises(ValueError, match=r"TF_CONFIG: \$\.cluster\.stanby: unknown role"):
        _model(strategy).fit(_data(), steps_per_epoch=1)


def test_strategy_and_fit_arguments():
    resolver = actorps.SimpleClusterResolver(CLUSTER)
    with pytest.raises(ValueError, match="consistency"):
        actorps.ParameterServerStrategy(resolver, consistency="eventual")
    strategy = actorps.ParameterServerStrategy(resolver)
    model = _model(strategy)
    with pytest.raises(ValueError, match="steps_per_epoch is required"):
        model.fit(_data())
    outside = actorps.Model.from_toml(SEED_CNN)
    with pytest.raises(ValueError, match="scope"):
        outside.fit(_data(), steps_per_epoch=1)
    with pytest.raises(ValueError, match="not supported"):
        model.compile(optimizer="adam", metrics=["mae"])


def test_refused_features_say_why():
    class PerBatch(actorps.Callback):
        def on_train_batch_end(self, batch, logs=None):
            pass

    strategy = actorps.ParameterServerStrategy(actorps.SimpleClusterResolver(CLUSTER))
    model = _model(strategy)
    with pytest.raises(ValueError, match="batch-level callbacks are not supported in parameter-server training"):
        model.fit(_data(), steps_per_epoch=1, callbacks=[PerBatch()])
    with pytest.raises(TypeError, match="schedule must be callable"):
        actorps.callbacks.LearningRateScheduler(0.1)
    with pytest.raises(ValueError, match="Python function"):
        _data().map(lambda x: x)
    with pytest.raises(ValueError, match="Python function"):
        actorps.ClusterCoordinator(strategy).schedule(lambda: 1)
    with pytest.raises(ValueError, match="model inside"):
        actorps.ClusterCoordinator(actorps.ParameterServerStrategy(actorps.SimpleClusterResolver(CLUSTER))
                                   ).create_per_worker_dataset(_data())


def test_load_job_reads_the_main_job():
    from conftest import SOURCE
    import os

    job = actorps.load_job(os.path.join(SOURCE, "config", "fashion_mnist.toml"))
    assert (job.epochs, job.steps_per_epoch) == (10, 938)
    assert job.tasks == ["coordinator:0", "worker:0", "worker:1", "ps:0", "ps:1"]


@pytest.mark.parametrize("partitioner", [
    actorps.partitioners.FixedShardsPartitioner(2), actorps.partitioners.MinSizePartitioner(1024, max_shards=2),
    actorps.partitioners.MaxSizePartitioner(4096), actorps.partitioners.LoadPartitioner(num_shards=3)])
@pytest.mark.parametrize("optimizer", [
    actorps.optimizers.SGD(0.1), actorps.optimizers.SGD(0.1, momentum=0.9, nesterov=True),
    actorps.optimizers.Adam(0.002, learning_rate_decay=0.7, warmup_steps=10), actorps.optimizers.Adagrad(0.1),
    actorps.optimizers.Ftrl(0.1, l1_regularization_strength=0.01, beta=0.5)])
def test_every_key_python_writes_is_one_the_loader_reads(partitioner, optimizer, tmp_path):
    two_ps = dict(CLUSTER, ps=["127.0.0.1:4", "127.0.0.1:5"])
    strategy = actorps.ParameterServerStrategy(actorps.SimpleClusterResolver(two_ps), variable_partitioner=partitioner,
                                               ps_replicas=2, device="cpu", threads_per_worker=1, pull_ahead=True,
                                               min_workers=2, seed=7, runtime={"threads": 1, "log_level": "warn"})
    model = _model(strategy)
    model.compile(optimizer=optimizer, steps_per_execution=5)
    cbs = actorps.callbacks.CallbackList([
        actorps.callbacks.BackupAndRestore(tmp_path / "ckpt", save_freq=100),
        actorps.callbacks.TensorBoard(tmp_path / "logs"),
        actorps.callbacks.EarlyStopping(monitor="loss", patience=3, min_delta=0.01)])
    training = dict(model._training(), epochs=3, steps_per_epoch=100, **cbs._training())
    csv = actorps.Dataset.from_csv([str(tmp_path / "a.csv")], columns=[
        {"name": "label", "kind": "label"}, "x1", {"name": "c", "kind": "categorical", "hash_buckets": 10}],
        header=True, bad_lines="skip")
    criteo = actorps.Dataset.from_criteo(str(tmp_path / "train.tsv")).shuffle(100).repeat().batch(256)
    for data in (_data().prefetch(2), csv.shuffle(10).repeat().batch(8), criteo,
                 actorps.Dataset.from_tfrecord(str(tmp_path / "a.tfrecord")).filter([0, 1]).shard(2, 1).batch(4)):
        job = strategy._parse(strategy._job_text(model, data, _data(), training))
        assert (job.epochs, job.steps_per_epoch, job.checkpoint_dir) == (3, 100, str(tmp_path / "ckpt"))
    # The loader's own rules still hold: replicated shards are async only.
    with pytest.raises(ValueError, match="ps_replicas: replicated shards need consistency"):
        sync = actorps.ParameterServerStrategy(actorps.SimpleClusterResolver(two_ps), consistency="sync",
                                               ps_replicas=2)
        sync._parse(sync._job_text(model, _data(), None, training))
