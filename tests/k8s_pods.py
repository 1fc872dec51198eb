#!/usr/bin/python3
"""The pods a Kubernetes manifest of config/k8s would run, for test_k8s.

Reads a manifest (python3-yaml) the way the Kubeflow training operator
(kubeflow.org/v1 TFJob) or the Job controller (Indexed Jobs + a headless
Service) would turn it into pods, and prints them as JSON:

    {"pods": [{"name", "names", "command", "env", "working_dir",
               "ports", "restart_codes"}]}

names: the DNS names that resolve to the pod; env: the container's
environment as Kubernetes composes it (fieldRef, configMapKeyRef, $(VAR)
expansion, and the operator's TF_CONFIG); restart_codes: the exit codes
after which the pod is restarted or replaced (its restart policy).
Checks that every address of every TF_CONFIG names a pod listening on that
port, and that each pod's task is one its cluster lists (e.g. a standby Job
whose ConfigMap lists no standby). On any problem: `MANIFEST: what` on stderr and exit 2.
"""
import json
import re
import sys

import yaml

OPERATOR_TYPES = {"Chief": "chief", "Master": "chief", "Worker": "worker", "PS": "ps", "Evaluator": "evaluator"}
RETRYABLE = list(range(128, 256))  # the ExitCode policy's retryable exits
FAILURES = list(range(1, 256))


class Bad(Exception):
    pass


def restart_codes(policy, job_spec=None):
    if policy == "ExitCode":
        return RETRYABLE
    if policy in ("OnFailure", "Always"):
        return FAILURES
    if policy == "Never" and job_spec is not None and job_spec.get("backoffLimit", 6) > 0:
        # The Job controller replaces a failed pod unless podFailurePolicy fails the Job on that exit code.
        final = set()
        for rule in job_spec.get("podFailurePolicy", {}).get("rules", []):
            codes = rule.get("onExitCodes")
            if rule["action"] == "FailJob" and codes and codes["operator"] == "In":
                final.update(codes["values"])
        return [c for c in FAILURES if c not in final]
    if policy == "Never":
        return []
    raise Bad(f"restartPolicy {policy!r}: expected ExitCode, OnFailure, Always or Never")


def field(pod, path):
    m = re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path)
    if m:
        return pod[m.group(1)][m.group(2)]
    if path == "metadata.name":
        return pod["name"]
    raise Bad(f"pod {pod['name']}: fieldRef {path!r} is not supported here")


def environment(container, pod, config_maps):
    """The container's env as the kubelet composes it: $(VAR) expands variables defined before it."""
    env = {}
    for var in container.get("env", []):
        if "value" in var:
            value = re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), var["value"])
        elif "fieldRef" in var.get("valueFrom", {}):
            value = field(pod, var["valueFrom"]["fieldRef"]["fieldPath"])
        elif "configMapKeyRef" in var.get("valueFrom", {}):
            ref = var["valueFrom"]["configMapKeyRef"]
            if ref["name"] not in config_maps or ref["key"] not in config_maps[ref["name"]]:
                raise Bad(f"pod {pod['name']}: env {var['name']}: no ConfigMap {ref['name']} with key {ref['key']}")
            value = config_maps[ref["name"]][ref["key"]]
        else:
            raise Bad(f"pod {pod['name']}: env {var['name']}: unsupported valueFrom")
        env[var["name"]] = value
    return env


def pod_entry(pod, container, env, restart):
    return {"name": pod["name"], "names": pod["names"], "command": container["command"] + container.get("args", []),
            "env": env, "working_dir": container.get("workingDir", "/"),
            "ports": [p["containerPort"] for p in container.get("ports", [])], "restart_codes": restart}


def tfjob_pods(job, namespace):
    """As training-operator v1 does: pod <job>-<type>-<i>, TF_CONFIG from the port named tfjob-port."""
    name, specs = job["metadata"]["name"], job["spec"]["tfReplicaSpecs"]
    for kind in specs:
        if kind not in OPERATOR_TYPES:
            raise Bad(f"tfReplicaSpecs.{kind}: expected one of {', '.join(OPERATOR_TYPES)}")

    def container_of(kind):
        containers = specs[kind]["template"]["spec"]["containers"]
        ours = [c for c in containers if c["name"] == "tensorflow"]
        if not ours:
            raise Bad(f"tfReplicaSpecs.{kind}: no container named 'tensorflow' (the operator's)")
        return ours[0]

    def port_of(kind):
        ports = [p["containerPort"] for p in container_of(kind).get("ports", []) if p.get("name") == "tfjob-port"]
        return ports[0] if ports else 2222

    cluster = {}
    for kind, spec in specs.items():
        if OPERATOR_TYPES[kind] != "evaluator":  # left out of the cluster, as the operator does
            task = OPERATOR_TYPES[kind]
            cluster[task] = [f"{name}-{task}-{i}.{namespace}.svc:{port_of(kind)}" for i in range(spec.get("replicas", 1))]
    pods = []
    for kind, spec in specs.items():
        task, container = OPERATOR_TYPES[kind], container_of(kind)
        for i in range(spec.get("replicas", 1)):
            pod_name = f"{name}-{task}-{i}"
            pod = {"name": pod_name, "names": [pod_name, f"{pod_name}.{namespace}.svc"], "labels": {}, "annotations": {}}
            env = environment(container, pod, {})
            env["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": task, "index": i},
                                           "environment": "cloud"})
            pods.append(pod_entry(pod, container, env, restart_codes(spec.get("restartPolicy", "Never"))))
    return pods


def job_pods(job, config_maps, services, namespace):
    """As the Job controller does for an Indexed Job: pod <job>-<i> in the template's subdomain."""
    name, spec = job["metadata"]["name"], job["spec"]
    if spec.get("completionMode") != "Indexed":
        raise Bad(f"Job {name}: completionMode must be Indexed (a task index per pod)")
    template = spec["template"]
    subdomain = template["spec"].get("subdomain")
    service = services.get(subdomain, {}).get("spec", {})
    selected = service.get("selector", {}).items() <= template["metadata"].get("labels", {}).items()
    if subdomain and (service.get("clusterIP") != "None" or not selected):
        raise Bad(f"Job {name}: subdomain {subdomain}: no headless Service {subdomain} selects its pods")
    pods = []
    for i in range(spec.get("completions", 1)):
        pod_name = f"{name}-{i}"
        names = [pod_name]
        if subdomain:
            names += [f"{pod_name}.{subdomain}", f"{pod_name}.{subdomain}.{namespace}.svc"]
        labels = dict(template["metadata"].get("labels", {}), **{"job-name": name})
        annotations = {"batch.kubernetes.io/job-completion-index": str(i)}
        pod = {"name": pod_name, "names": names, "labels": labels, "annotations": annotations}
        for container in template["spec"]["containers"]:
            env = environment(container, pod, config_maps)
            pods.append(pod_entry(pod, container, env, restart_codes(template["spec"]["restartPolicy"], spec)))
    return pods


COORDINATOR_KEYS = ("chief", "coordinator", "master")  # one task, any of the names (config/tf_config.cpp)


def check_task(pod, tf_config):
    """The pod's task is in its cluster (the evaluator is outside it)."""
    task, cluster = tf_config.get("task"), tf_config["cluster"]
    if not task or task["type"] == "evaluator":
        return
    keys = COORDINATOR_KEYS if task["type"] in COORDINATOR_KEYS else (task["type"],)
    listed = next((cluster[k] for k in keys if k in cluster), [])
    if not 0 <= int(task["index"]) < len(listed):
        raise Bad(f"pod {pod['name']}: TF_CONFIG task {task['type']}:{task['index']}: its cluster lists "
                  f"{len(listed)} {task['type']} address(es)")


def check_addresses(pods):
    """Every TF_CONFIG address: a pod's name, and a port that pod listens on."""
    by_name = {n: p for p in pods for n in p["names"]}
    for pod in pods:
        if "TF_CONFIG" not in pod["env"]:
            raise Bad(f"pod {pod['name']}: no TF_CONFIG in its environment")
        try:
            tf_config = json.loads(pod["env"]["TF_CONFIG"])
        except json.JSONDecodeError as e:
            raise Bad(f"pod {pod['name']}: TF_CONFIG is not JSON ({e}): {pod['env']['TF_CONFIG']}")
        check_task(pod, tf_config)
        for task, addresses in tf_config["cluster"].items():
            for i, address in enumerate(addresses):
                host, port = address.rsplit(":", 1)
                if host not in by_name:
                    raise Bad(f"pod {pod['name']}: TF_CONFIG cluster.{task}[{i}] = {address}: no pod is named {host}")
                target = by_name[host]
                if int(port) not in target["ports"]:
                    raise Bad(f"pod {pod['name']}: TF_CONFIG cluster.{task}[{i}] = {address}: pod {target['name']} "
                              f"listens on containerPort {target['ports']}, not {port}")


def read(path):
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    objects = [item for d in docs for item in (d["items"] if d["kind"] == "List" else [d])]
    namespace = "default"
    config_maps = {o["metadata"]["name"]: o.get("data", {}) for o in objects if o["kind"] == "ConfigMap"}
    services = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Service"}
    pods = []
    for o in objects:
        if o["kind"] == "TFJob":
            pods += tfjob_pods(o, o["metadata"].get("namespace", namespace))
        elif o["kind"] == "Job":
            pods += job_pods(o, config_maps, services, o["metadata"].get("namespace", namespace))
        elif o["kind"] not in ("ConfigMap", "Service", "PersistentVolumeClaim"):
            raise Bad(f"{o['kind']} {o['metadata']['name']}: not a kind this reader knows")
    if not pods:
        raise Bad("no TFJob or Job: no pods")
    check_addresses(pods)
    return pods


def main():
    if len(sys.argv) != 2:
        print("usage: k8s_pods.py MANIFEST", file=sys.stderr)
        return 2
    try:
        print(json.dumps({"pods": read(sys.argv[1])}, indent=1))
    except (Bad, KeyError, yaml.YAMLError) as e:
        print(f"{sys.argv[1]}: {e if isinstance(e, Bad) else 'malformed: ' + repr(e)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
