"""Model.from_torch: a PyTorch module exported to ONNX, trained from
PyTorch's initial weights on a local cluster, exported back."""

import numpy as np
import pytest

import actorps
from conftest import test_data, train_data

torch = pytest.importorskip("torch")


def test_torch_module_trains_from_its_own_weights(tmp_path):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 8, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(),
                              torch.nn.Linear(8 * 13 * 13, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    with actorps.testing.local_cluster(num_workers=2, num_ps=1) as resolver:
        strategy = actorps.ParameterServerStrategy(resolver, threads_per_worker=1)
        with strategy.scope():
            model = actorps.Model.from_torch(net, torch.zeros(1, 1, 28, 28))
        assert model.get_config()["inputs"] == [{"name": "x", "shape": [28, 28, 1], "kind": "float"}]
        before = model.get_weights()
        assert [w.shape for w in before] == [(3, 3, 1, 8), (8,), (1352, 64), (64,), (64, 10), (10,)]
        # PyTorch's initial values, in actorps's layouts (OIHW -> HWIO, [out, in] -> [in, out])
        np.testing.assert_array_equal(before[0], net[0].weight.detach().numpy().transpose(2, 3, 1, 0))
        np.testing.assert_array_equal(before[5], net[6].bias.detach().numpy())
        np.testing.assert_array_equal(before[4], net[6].weight.detach().numpy().T)
        # set_weights before the model connects: assigned when it does (the last bias zeroed)
        before[5][:] = 0
        model.set_weights(before)
        model.compile(actorps.optimizers.Adam(0.003), steps_per_execution=5)
        assert not model.get_weights()[5].any()
        history = model.fit(train_data(), epochs=1, steps_per_epoch=300, validation_data=test_data())
        assert history.history["val_accuracy"][0] >= 0.6, history.history
        model.export(tmp_path / "trained.onnx")
        assert (tmp_path / "trained.onnx").stat().st_size > 4 * 1352 * 64
