"""actorps.Server: worker and PS nodes served by Python processes from
their TF_CONFIG, trained on by this process as the chief, and stopped by
the strategy's end_job."""

import json
import os
import subprocess
import sys

import pytest

import actorps
from actorps.testing import free_ports
from conftest import SEED_CNN, test_data, train_data

SERVE = ("import actorps; "
         "print('exit', actorps.Server(actorps.TFConfigClusterResolver(), runtime={'threads': 1}).join(), flush=True)")


def test_servers_from_tf_config(capfd):
    ports = free_ports(3)
    spec = {"chief": [f"127.0.0.1:{ports[0]}"], "worker": [f"127.0.0.1:{ports[1]}"], "ps": [f"127.0.0.1:{ports[2]}"]}
    procs = []
    try:
        for role in ("worker", "ps"):
            env = dict(os.environ, TF_CONFIG=json.dumps({"cluster": spec, "task": {"type": role, "index": 0}}))
            procs.append(subprocess.Popen([sys.executable, "-c", SERVE], env=env, stdout=subprocess.PIPE, text=True))
        for p, task in zip(procs, ("worker:0", "ps:0")):
            assert p.stdout.readline().startswith(f"actorps node ready: {task} at 127.0.0.1:")
        strategy = actorps.ParameterServerStrategy(actorps.SimpleClusterResolver(spec), threads_per_worker=1,
                                                   runtime={"threads": 1})
        with strategy.scope():
            model = actorps.Model.from_toml(SEED_CNN)
        model.compile("adam")
        history = model.fit(train_data(), steps_per_epoch=50)
        assert history.history["loss"][0] < 2.3  # below chance's log(10) after 50 steps

        class Raises(actorps.Callback):
            def on_epoch_end(self, epoch, logs=None):
                raise RuntimeError(f"boom at epoch {epoch}")

        # A second fit of the same model goes on on the same cluster; a callback's exception ends it.
        capfd.readouterr()
        with pytest.raises(RuntimeError, match="boom at epoch 0"):
            model.fit(train_data(), epochs=3, steps_per_epoch=20, callbacks=[Raises()], verbose=0)
        assert "epoch 1/3" not in capfd.readouterr().out  # verbose=0: no progress on stdout
        assert model.evaluate(test_data(), return_dict=True)["accuracy"] > 0.3
        model.compile("sgd")  # the shards hold Adam's slots: refused, not silently ignored
        with pytest.raises(ValueError, match="the shards cannot change to"):
            model.fit(train_data(), steps_per_epoch=20)
        strategy.end_job()
        for p in procs:  # each node exits 0 once the job ended, and Server.join returns it
            out, _ = p.communicate(timeout=30)
            assert p.returncode == 0 and out.strip().endswith("exit 0"), out
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
