"""Cluster resolvers and their TF_CONFIG, checked by the C++ loader."""

import json

import actorps

SPEC = {"chief": ["127.0.0.1:5000"], "worker": ["127.0.0.1:5001", "127.0.0.1:5002"], "ps": ["127.0.0.1:5003"]}


def test_simple_cluster_resolver():
    r = actorps.SimpleClusterResolver(SPEC, task_type="worker", task_id=1)
    assert r.cluster_spec() == SPEC and r.cluster_spec() is not r.cluster_spec()
    assert (r.task_type, r.task_id, r.num_workers(), r.num_ps()) == ("worker", 1, 2, 1)
    assert json.loads(r._tf_config()) == {"cluster": SPEC, "task": {"type": "worker", "index": 1}}
    server = actorps.Server(r)
    assert server.task_string() == "worker:1"
    assert server.tasks() == ["coordinator:0", "worker:0", "worker:1", "ps:0"]


def test_chief_outside_the_cluster_is_left_out_of_the_task():
    spec = {k: v for k, v in SPEC.items() if k != "chief"}
    r = actorps.SimpleClusterResolver(spec)  # task chief:0 by default
    assert json.loads(r._tf_config()) == {"cluster": spec}
    assert actorps._actorps.cluster_tasks("", "<test>", r._tf_config()) == ["worker:0", "worker:1", "ps:0"]


def test_tf_config_cluster_resolver(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    r = actorps.TFConfigClusterResolver()
    assert r.cluster_spec() == {} and r.task_type is None and r.task_id is None
    text = json.dumps({"cluster": SPEC, "task": {"type": "ps", "index": 0}})
    monkeypatch.setenv("TF_CONFIG", text)
    assert r.cluster_spec() == SPEC and (r.task_type, r.task_id) == ("ps", 0)
    assert r._tf_config() == text
    r2 = actorps.TFConfigClusterResolver(task_type="worker", task_id=1)
    assert json.loads(r2._tf_config())["task"] == {"type": "worker", "index": 1}
    assert actorps.Server(r).task_string() == "ps:0"
