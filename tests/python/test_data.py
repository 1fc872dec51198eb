"""TF's dataset_fn forms: a Dataset, a DatasetCreator, a function of an
InputContext or of nothing; anything else a ValueError naming the argument."""
import pytest

import actorps
from actorps.data import Dataset, DatasetCreator, InputContext, dataset_of

DATA = Dataset.from_synthetic(examples=100, features=4, classes=2).batch(10)


def test_every_dataset_fn_form_gives_the_dataset():
    seen = []

    def with_context(ctx):
        seen.append(ctx)
        return DATA.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)

    assert dataset_of(DATA, "x") is DATA
    assert dataset_of(lambda: DATA, "x") is DATA
    assert dataset_of(with_context, "x", num_workers=4) is DATA  # shard(1, 0): the coordinator shards
    assert dataset_of(DatasetCreator(with_context), "x", num_workers=4) is DATA
    assert [c.num_input_pipelines for c in seen] == [1, 1]
    assert [c.input_pipeline_id for c in seen] == [0, 0]
    assert seen[0].num_replicas_in_sync == 4
    assert seen[0].get_per_replica_batch_size(256) == 64


def test_what_is_not_a_dataset_is_refused_by_name():
    with pytest.raises(ValueError, match="fit: x: expected an actorps.data.Dataset"):
        dataset_of(42, "fit: x")
    with pytest.raises(ValueError, match="create_per_worker_dataset: expected"):
        dataset_of(lambda: [1, 2], "create_per_worker_dataset")
    with pytest.raises(TypeError, match="dataset_fn must be callable"):
        DatasetCreator(DATA)
    with pytest.raises(ValueError, match="not divisible by the 3 workers"):
        InputContext(3).get_per_replica_batch_size(64)


def test_a_real_shard_is_kept():
    assert "shard" in DATA.shard(2, 1)._toml("dataset")
    assert actorps.data.DatasetCreator is DatasetCreator
