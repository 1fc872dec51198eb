"""A cluster on this machine for tests and examples: ``actorps node``
processes for the workers and PS tasks, this process the chief.

>>> with actorps.testing.local_cluster(num_workers=2, num_ps=2) as resolver:
...     strategy = actorps.ParameterServerStrategy(resolver)
"""

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import tempfile
import threading
import time

from . import _actorps
from . import _toml
from . import strategy
from .cluster_resolver import SimpleClusterResolver

__all__ = ["local_cluster", "free_ports"]


def free_ports(n, host="127.0.0.1"):
    """`n` distinct TCP ports free on `host` now (bound and released)."""
    socks, ports = [], []
    try:
        while len(ports) < n:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host, 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


def _topology(spec, runtime):
    """The TOML topology of a TF_CONFIG-style cluster (same order, tasks
    and cluster name as TF_CONFIG gives), with `runtime`."""
    parts = []
    for role in ("chief", "worker", "ps"):
        for address in spec.get(role, []):
            host, port = address.rsplit(":", 1)
            parts.append(_toml.table("[cluster.nodes]", {  # ([[cluster.nodes]])
                "host": host, "port": int(port), "roles": ["coordinator" if role == "chief" else role]}))
    return _toml.document(_toml.table("cluster", {"name": "actorps"}), *parts,
                          _toml.table("runtime", runtime) if runtime else "")


def _drain(pipe):
    try:
        while pipe.read(4096):
            pass
    except (OSError, ValueError):
        pass


def _wait_ready(proc, task, deadline, log_path):
    out = b""
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        ready, _, _ = select.select([proc.stdout], [], [], 0.1)
        if ready:
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                break
            out += chunk
            if b"actorps node ready" in out:
                threading.Thread(target=_drain, args=(proc.stdout,), daemon=True).start()
                return
    with open(log_path, "rb") as f:
        log = f.read().decode(errors="replace")[-2000:]
    raise RuntimeError(f"local_cluster: {task} did not start (exit {proc.poll()}); its log:\n{log}")


@contextlib.contextmanager
def local_cluster(num_workers=2, num_ps=2, runtime=None, binary=None, log_dir=None, timeout=30):
    """Starts `num_workers` worker and `num_ps` PS nodes (``actorps node``,
    each with its TF_CONFIG) on free loopback ports, waits until each
    serves, and yields a SimpleClusterResolver of the cluster with this
    process as its chief; stops the nodes at exit (a strategy connected
    to them lets go of them first). `runtime`: [runtime]
    keys for every node and the chief (default threads = 1: the processes
    share this machine's cores). Nodes' logs go to `log_dir` (default: a
    temporary directory)."""
    runtime = {"threads": 1} if runtime is None else dict(runtime)
    binary = binary or _actorps.ACTORPS_BIN
    ports = free_ports(1 + num_workers + num_ps)
    addr = [f"127.0.0.1:{p}" for p in ports]
    spec = {"chief": addr[:1], "worker": addr[1:1 + num_workers], "ps": addr[1 + num_workers:]}
    tmp = None
    if log_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="actorps-local-")
        log_dir = tmp.name
    os.makedirs(log_dir, exist_ok=True)
    topology = os.path.join(log_dir, "cluster.toml")
    with open(topology, "w") as f:
        f.write(_topology(spec, runtime))
    procs = []
    try:
        for role, count in (("worker", num_workers), ("ps", num_ps)):
            for i in range(count):
                task = f"{role}:{i}"
                env = dict(os.environ)
                env["TF_CONFIG"] = json.dumps({"cluster": spec, "task": {"type": role, "index": i}})
                log_path = os.path.join(log_dir, f"{role}-{i}.log")
                # --config: the same cluster as TOML, so that [runtime] (threads) applies too
                with open(log_path, "ab") as log:
                    proc = subprocess.Popen([binary, "node", "--config", topology, "--task", task,
                                             "--exit-with-parent"], stdout=subprocess.PIPE, stderr=log, env=env,
                                            stdin=subprocess.DEVNULL)
                procs.append((task, proc, log_path))
        deadline = time.monotonic() + timeout
        for task, proc, log_path in procs:
            _wait_ready(proc, task, deadline, log_path)
        resolver = SimpleClusterResolver(spec, task_type="chief", task_id=0)
        resolver._runtime = dict(runtime)
        resolver.log_dir = log_dir
        yield resolver
    finally:
        # A coordinator of this process lets go first: it would dial the
        # stopped nodes' ports again (where another cluster may come up).
        strategy._release(spec)
        for _, proc, _ in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        end = time.monotonic() + 10
        for _, proc, _ in procs:
            try:
                proc.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        if tmp is not None:
            tmp.cleanup()
