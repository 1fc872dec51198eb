#!/usr/bin/env bash
# A cluster CA and a certificate per task, for a topology's [security]
# table (mutual TLS between nodes):
#
#   bash tools/make_certs.sh DIR TASK...      e.g. certs coordinator-0 worker-0 worker-1 ps-0 ps-1
#
# writes DIR/ca.crt (+ DIR/ca.key: keep it off the cluster) and, per task,
# DIR/TASK.crt and DIR/TASK.key signed by it; then in the topology:
#
#   [security]
#   ca = "DIR/ca.crt"
#   cert = "DIR/{task}.crt"
#   key = "DIR/{task}.key"
#
# An existing CA in DIR is reused (new tasks join the same cluster).
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 DIR TASK..." >&2
  exit 2
fi
dir=$1
shift
mkdir -p "$dir"
if [ ! -f "$dir/ca.key" ]; then
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=actorps cluster CA" \
    -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
fi
for task in "$@"; do
  openssl req -newkey rsa:2048 -nodes -subj "/CN=$task" -keyout "$dir/$task.key" -out "$dir/$task.csr" 2>/dev/null
  openssl x509 -req -in "$dir/$task.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial -days 3650 \
    -out "$dir/$task.crt" 2>/dev/null
  rm -f "$dir/$task.csr"
  chmod 600 "$dir/$task.key"
done
echo "wrote $dir/ca.crt and certificates for: $*"
