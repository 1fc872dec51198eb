"""Variable partitioners, as ``tf.distribute.experimental.partitioners``:
how many shards each variable gets on the PS tasks ([training]
partitioner and its keys, config/README.md)."""

__all__ = ["Partitioner", "FixedShardsPartitioner", "MinSizePartitioner", "MaxSizePartitioner", "LoadPartitioner"]


class Partitioner:
    """The base: `_training()` gives the [training] keys."""

    def _training(self):
        raise NotImplementedError


class FixedShardsPartitioner(Partitioner):
    """Every variable in `num_shards` shards (``partitioner = "fixed"``)."""

    def __init__(self, num_shards):
        self.num_shards = num_shards

    def _training(self):
        return {"partitioner": "fixed", "num_shards": self.num_shards}


class MinSizePartitioner(Partitioner):
    """Shards of at least `min_shard_bytes`, at most `max_shards` of them
    (``partitioner = "min_size"``; TF's usual choice). `max_shards=None`: one
    per ps task."""

    def __init__(self, min_shard_bytes=256 << 10, max_shards=1, bytes_per_string=16):
        self.min_shard_bytes = min_shard_bytes
        self.max_shards = max_shards
        self.bytes_per_string = bytes_per_string  # (TF's; actorps variables hold no strings)

    def _training(self):
        return {"partitioner": "min_size", "min_shard_bytes": self.min_shard_bytes, "max_shards": self.max_shards}


class MaxSizePartitioner(Partitioner):
    """Shards of at most `max_shard_bytes`, at most `max_shards` of them
    (None: no cap) (``partitioner = "max_size"``)."""

    def __init__(self, max_shard_bytes, max_shards=None, bytes_per_string=16):
        self.max_shard_bytes = max_shard_bytes
        self.max_shards = max_shards
        self.bytes_per_string = bytes_per_string

    def _training(self):
        return {"partitioner": "max_size", "max_shard_bytes": self.max_shard_bytes,
                "max_shards": 0 if self.max_shards is None else self.max_shards}


class LoadPartitioner(Partitioner):
    """actorps's own (``partitioner = "load"``, async jobs): variables of at
    least `min_shard_bytes` in `num_shards` parts (None: 4 per ps task),
    placed on the least loaded PS tasks and moved by measured load every
    `rebalance_interval_s` until the busiest is within `max_load_ratio` of
    the mean."""

    def __init__(self, num_shards=None, min_shard_bytes=256 << 10, rebalance_interval_s=10, max_load_ratio=1.3):
        self.num_shards = num_shards
        self.min_shard_bytes = min_shard_bytes
        self.rebalance_interval_s = rebalance_interval_s
        self.max_load_ratio = max_load_ratio

    def _training(self):
        return {"partitioner": "load", "num_shards": self.num_shards, "min_shard_bytes": self.min_shard_bytes,
                "rebalance_interval_s": self.rebalance_interval_s, "max_load_ratio": float(self.max_load_ratio)}
