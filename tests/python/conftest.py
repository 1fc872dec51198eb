"""Shared paths and data for the tests of `import actorps` (run by ctest's
test_python with PYTHONPATH=build/python; see tests/CMakeLists.txt)."""

import os

import pytest

SOURCE = os.environ.get("ACTORPS_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FASHION = os.path.join(SOURCE, "data", "fashion")
SEED_CNN = os.path.join(SOURCE, "config", "seed_cnn.toml")


def fashion(split="train"):
    """Fashion-MNIST's IDX files of `split` ("train" or "t10k"), skipping the test when they are missing."""
    images = os.path.join(FASHION, f"{split}-images-idx3-ubyte")
    labels = os.path.join(FASHION, f"{split}-labels-idx1-ubyte")
    if not (os.path.exists(images) and os.path.exists(labels)):
        pytest.skip("no Fashion-MNIST data: bash tools/fetch_data.sh")
    return images, labels


def train_data(batch=64):
    """The main job's training pipeline (config/fashion_mnist.toml)."""
    import actorps

    return (actorps.Dataset.from_idx(*fashion("train")).map("scale", factor=1 / 255)
            .shuffle(30000, seed=1).repeat().batch(batch))


def test_data(batch=500):
    """The main job's evaluation pipeline: the 10,000 test images."""
    import actorps

    return actorps.Dataset.from_idx(*fashion("t10k")).map("scale", factor=1 / 255).batch(batch)


test_data.__test__ = False  # (a helper, not a test)
