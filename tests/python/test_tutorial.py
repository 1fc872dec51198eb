"""apps/python/examples: TF's parameter-server tutorial as two programs
(tutorial_fit.py: Model.fit; tutorial_loop.py: ClusterCoordinator), each
run as a subprocess, short (2 epochs of 300 steps of the main job's
Fashion-MNIST CNN), the three ways: (a) no TF_CONFIG, a local cluster of
its own; (b) + (c) TF's recipe, the same program once per process with
its TF_CONFIG: 2 workers and 2 PS tasks served, a chief training.

Accuracy bounds, from 2 x 300 steps measured on a 2-core machine under
other load (nice 19), about 30 runs each: tutorial_fit 82.9-86.9%, mostly
84.5-86.5% (Adam 0.002, decay 0.7 per epoch); tutorial_loop 79.7-87.3%,
mostly 83-87% (Adam 0.002 without decay: a custom loop has no per-epoch
decay, so noisier). About 3-10 s per run; the file about 15-30 s."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from actorps.testing import free_ports
from conftest import SOURCE, fashion

EXAMPLES = os.path.join(SOURCE, "apps", "python", "examples")
SHORT = ["--epochs", "2", "--steps-per-epoch", "300"]
BOUND = {"tutorial_fit.py": 80.0, "tutorial_loop.py": 75.0}  # test accuracy, %, after SHORT


def _env(tf_config=None):
    env = dict(os.environ)
    env.pop("TF_CONFIG", None)
    if tf_config is not None:
        env["TF_CONFIG"] = json.dumps(tf_config)
    return env


def _run(program, args, env, timeout=180):
    fashion("train"), fashion("t10k")  # (skips without the data)
    start = time.monotonic()
    proc = subprocess.run([sys.executable, os.path.join(EXAMPLES, program)] + args, env=env, capture_output=True,
                          text=True, timeout=timeout)
    print(f"{program}: exit {proc.returncode} after {time.monotonic() - start:.1f} s")
    return proc


def _accuracy(out):
    found = re.findall(r"^test accuracy (\d+\.\d+)%$", out, re.M)
    assert len(found) == 1, out
    return float(found[0])


def test_fit_with_its_own_local_cluster(tmp_path):
    proc = _run("tutorial_fit.py", SHORT + ["--workdir", str(tmp_path)], _env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    accuracy = _accuracy(proc.stdout)
    print(f"tutorial_fit.py: test accuracy {accuracy:.2f}%")
    assert accuracy >= BOUND["tutorial_fit.py"], proc.stdout
    history = json.loads(re.search(r"^history: (.*)$", proc.stdout, re.M).group(1))
    assert history["loss"][1] < history["loss"][0] and len(history["val_accuracy"]) == 2
    assert history["val_accuracy"][-1] == pytest.approx(accuracy / 100, abs=1e-4)
    # the callbacks' files: BackupAndRestore's checkpoints, TensorBoard's metrics
    assert any(f.startswith("ckpt-") for f in os.listdir(tmp_path / "backup"))
    assert (tmp_path / "logs" / "metrics.csv").exists()


def test_loop_with_its_own_local_cluster(tmp_path):
    proc = _run("tutorial_loop.py", SHORT + ["--workdir", str(tmp_path)], _env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    losses = [float(x) for x in re.findall(r"^epoch \d+/2: 300 steps in .* s, loss (\S+), accuracy", proc.stdout,
                                           re.M)]
    assert len(losses) == 2 and losses[1] < losses[0], proc.stdout
    accuracy = _accuracy(proc.stdout)
    print(f"tutorial_loop.py: losses {losses}, test accuracy {accuracy:.2f}%")
    assert accuracy >= BOUND["tutorial_loop.py"], proc.stdout
    assert (tmp_path / "model.onnx").stat().st_size > 4 * 5408 * 64


def _wait_ready(procs, logs, deadline):
    """Until each server's log says "actorps node ready" (ValueError: one exited or it took too long)."""
    for task, proc in procs.items():
        log = logs / f"{task.replace(':', '-')}.log"
        while "actorps node ready" not in log.read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"{task} did not start (exit {proc.poll()}); its log:\n{log.read_text()[-2000:]}")
            time.sleep(0.05)


def _start_recipe(program, chief_args, tmp_path):
    """The same program once per task, each with its TF_CONFIG: 2 workers
    and 2 PS tasks served, then (once they serve) the chief with
    `chief_args`; the processes by task, and when they started."""
    fashion("train"), fashion("t10k")
    addr = [f"127.0.0.1:{p}" for p in free_ports(5)]
    spec = {"chief": addr[:1], "worker": addr[1:3], "ps": addr[3:]}
    path = os.path.join(EXAMPLES, program)
    procs = {}
    start = time.monotonic()
    for role, count in (("worker", 2), ("ps", 2), ("chief", 1)):
        if role == "chief":  # (the chief would wait for them too; started after, its run is the same each time)
            _wait_ready(procs, tmp_path, start + 60)
        for i in range(count):
            env = _env({"cluster": spec, "task": {"type": role, "index": i}})
            args = chief_args + ["--workdir", str(tmp_path / "chief")] if role == "chief" else []
            with open(tmp_path / f"{role}-{i}.log", "w") as log:
                procs[f"{role}:{i}"] = subprocess.Popen([sys.executable, path] + args, env=env, text=True,
                                                        stdout=subprocess.PIPE if role == "chief" else log,
                                                        stderr=subprocess.STDOUT)
    return procs, start


def _assert_nodes_ended(procs, ended, tmp_path):
    """Every worker and PS process exits 0 within 15 s of the chief's end, having heard the job end."""
    for task, proc in procs.items():
        if task == "chief:0":
            continue
        log_path = tmp_path / f"{task.replace(':', '-')}.log"
        try:
            proc.wait(timeout=max(0.1, ended + 15 - time.monotonic()))
        except subprocess.TimeoutExpired:
            pytest.fail(f"{task} still runs 15 s after the chief ended the job; its log:\n"
                        + log_path.read_text()[-2000:])
        log = log_path.read_text()
        assert proc.returncode == 0, f"{task} exited {proc.returncode}:\n{log[-2000:]}"
        assert "the job ended" in log, log[-2000:]


def _kill_all(procs):
    for proc in procs.values():
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("program", ["tutorial_fit.py", "tutorial_loop.py"])
def test_tf_config_recipe(program, tmp_path):
    """Five processes of the same program, one TF_CONFIG each: the chief
    trains and ends the job, and then every worker and PS process exits 0."""
    procs = {}
    try:
        procs, start = _start_recipe(program, SHORT, tmp_path)
        out, _ = procs["chief:0"].communicate(timeout=180)
        ended = time.monotonic()
        print(f"{program}: the chief exited {procs['chief:0'].returncode} after {ended - start:.1f} s")
        assert procs["chief:0"].returncode == 0, out
        accuracy = _accuracy(out)
        print(f"{program} (TF_CONFIG): test accuracy {accuracy:.2f}%")
        assert accuracy >= BOUND[program], out
        _assert_nodes_ended(procs, ended, tmp_path)
        print(f"{program}: every node exited 0 within {time.monotonic() - ended:.2f} s of the chief")
    finally:
        _kill_all(procs)


def test_ctrl_c_on_the_chief_leaves_a_checkpoint_and_stops_the_nodes(tmp_path):
    """SIGINT to the chief during fit (after its first epoch's checkpoint):
    it writes a checkpoint of where training is, raises KeyboardInterrupt,
    ends the job, and every node exits 0."""
    procs = {}
    try:
        procs, _ = _start_recipe("tutorial_fit.py", ["--epochs", "20", "--steps-per-epoch", "300"], tmp_path)
        backup = tmp_path / "chief" / "backup"
        deadline = time.monotonic() + 120
        while not (backup.exists() and any(f.startswith("ckpt-") for f in os.listdir(backup))):
            assert procs["chief:0"].poll() is None and time.monotonic() < deadline, "no first checkpoint"
            time.sleep(0.05)
        time.sleep(0.5)  # into the second epoch
        procs["chief:0"].send_signal(signal.SIGINT)
        out, _ = procs["chief:0"].communicate(timeout=60)
        ended = time.monotonic()
        assert procs["chief:0"].returncode in (-signal.SIGINT, 128 + signal.SIGINT, 1), out
        assert "KeyboardInterrupt" in out, out
        steps = sorted(int(f.split("-")[1].split(".")[0]) for f in os.listdir(backup) if f.startswith("ckpt-"))
        assert steps[0] == 300 and steps[-1] % 300 != 0, (steps, out)  # an epoch's, then Ctrl-C's mid-epoch one
        _assert_nodes_ended(procs, ended, tmp_path)
    finally:
        _kill_all(procs)
