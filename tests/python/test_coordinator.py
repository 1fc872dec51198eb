"""The custom training loop: ClusterCoordinator's per-worker datasets,
schedule, join, fetch on a local cluster (2 workers, 2 PS processes)."""

import math

import numpy as np

import pytest

import actorps
from conftest import SEED_CNN, train_data


@pytest.fixture
def cluster():  # a fresh one per test: the nodes keep a coordinator's variables for the next one
    with actorps.testing.local_cluster(num_workers=2, num_ps=2) as resolver:
        yield resolver


def test_schedule_train_steps(cluster):
    strategy = actorps.ParameterServerStrategy(cluster, threads_per_worker=1)
    with strategy.scope():
        model = actorps.Model.from_toml(SEED_CNN)
        model.compile(optimizer=actorps.optimizers.SGD(0.05, momentum=0.9))
    initial = model.get_weights()  # not connected yet: the values the variables will start from
    coordinator = actorps.ClusterCoordinator(strategy)
    per_worker = coordinator.create_per_worker_dataset(lambda: train_data(batch=32))
    assert per_worker.info == {"features": 784, "examples": 60000}
    for before, now in zip(initial, model.get_weights()):  # the PS tasks hold exactly them
        np.testing.assert_array_equal(before, now)
    it = iter(per_worker)
    assert it is per_worker

    results = [coordinator.schedule("train_step", args=(it, 10)) for _ in range(30)]
    coordinator.join()
    assert coordinator.done()
    fetched = coordinator.fetch(results)
    for loss_sum, correct, examples, steps in fetched:
        assert (examples, steps) == (320, 10)
        assert 0 <= correct <= examples and math.isfinite(loss_sum)
    first = sum(r[0] for r in fetched[:5]) / (5 * 320)
    last = sum(r[0] for r in fetched[-5:]) / (5 * 320)
    assert last < first, (first, last)  # it learns: mean loss of the last 50 steps below the first 50's
    assert results[0].get() == fetched[0] and results[0].ready()

    assert coordinator.schedule("noop").fetch() == []
    weights = model.get_weights()
    assert [w.shape for w in weights] == [(3, 3, 1, 32), (32,), (5408, 64), (64,), (64, 10), (10,)]
    assert all((w != i).any() for w, i in zip(weights, initial))  # every variable trained


def test_errors_of_closures(cluster):
    strategy = actorps.ParameterServerStrategy(cluster, threads_per_worker=1)
    with strategy.scope():
        model = actorps.Model.from_toml(SEED_CNN)
    weights = model.get_weights()
    weights[0][:], weights[5][:] = 0.5, 7
    model.set_weights(weights)  # not connected yet: assigned when it connects
    coordinator = actorps.ClusterCoordinator(strategy)
    # A dataset that runs out: train_step ends with OutOfRangeError, as a tf.data iterator does.
    short = coordinator.create_per_worker_dataset(
        actorps.Dataset.from_synthetic(64, 784, 10).batch(32))
    assert model._connected() is not None
    for expected, now in zip(weights, model.get_weights()):
        np.testing.assert_array_equal(expected, now)
    value = coordinator.schedule("train_step", args=(short, 10))
    with pytest.raises(actorps.errors.OutOfRangeError, match="the dataset ended after 1 of 10 steps") as e:
        coordinator.join()
    assert (e.value.code, e.value.exit_code) == ("out_of_range", 1)
    with pytest.raises(actorps.errors.OutOfRangeError):
        value.fetch()
    with pytest.raises(ValueError, match="no function 'no_such_function' on this worker"):
        coordinator.schedule("no_such_function").fetch()
    with pytest.raises(ValueError):
        coordinator.join()
    with pytest.raises(TypeError, match="closure argument"):
        coordinator.schedule("train_step", args=(short, "ten"))
    assert coordinator.done()


def test_a_second_strategy_takes_the_cluster(cluster):
    def connect():
        strategy = actorps.ParameterServerStrategy(cluster, threads_per_worker=1)
        with strategy.scope():
            model = actorps.Model.from_toml(SEED_CNN)
        coordinator = actorps.ClusterCoordinator(strategy)
        return strategy, model, coordinator, coordinator.create_per_worker_dataset(train_data(batch=32))

    first = connect()
    long = first[2].schedule("train_step", args=(first[3], 100000))  # still running when the second connects
    with pytest.warns(UserWarning, match="let go of its cluster"):
        second = connect()
    with pytest.raises(actorps.errors.CancelledError, match="closed before it finished"):
        long.fetch()
    with pytest.raises(ValueError, match="another strategy connected to it"):
        first[2].schedule("noop")
    loss_sum, correct, examples, steps = second[2].schedule("train_step", args=(second[3], 5)).fetch()
    assert (examples, steps) == (160, 5)
