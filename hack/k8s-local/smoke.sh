#!/usr/bin/env bash
# Checks that the running k8s-local cluster serves what drip's chart and e2e
# suite need, in about half a minute: a Deployment of the pause image, a
# StatefulSet behind a headless Service whose pod names resolve through
# CoreDNS from another pod, a ClusterIP Service through kube-proxy, the API
# server through the kubernetes Service with the published root CA, and
# kubectl exec and logs through the kubelet. Exits non-zero on the first
# failure, with what it saw. Leaves nothing behind (its namespace is
# deleted, its image stays in containerd until down.sh).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

[ -f "$RUN_DIR/env" ] || die "no cluster is up (no $RUN_DIR/env): run make k8s-local-up"
# shellcheck disable=SC1091 # written by up.sh
. "$RUN_DIR/env"
# A fresh namespace each run: CoreDNS would answer a reused one's pod
# names from its cache with the previous run's addresses.
NS=drip-k8s-smoke-$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
IMAGE=drip.local/smoke:1
t0=$SECONDS
kc() { kubectl --kubeconfig "$KUBECONFIG" "$@"; }
cleanup() { kc delete namespace "$NS" --wait=false --ignore-not-found >/dev/null 2>&1 || true; }
trap cleanup EXIT
failed() {
  log "FAIL: $*"
  kc -n "$NS" get pods -o wide >&2 || true
  kc -n "$NS" describe pods 2>&1 | tail -n 40 >&2 || true
  exit 1
}

(cd "$REPO_ROOT" && go run ./cmd/ociimage static -pkg ./hack/k8s-local/smoke -ref "$IMAGE" -o "$IMAGE_DIR/smoke.tar") \
  || die "could not pack the smoke image"
ctr -n k8s.io images import "$IMAGE_DIR/smoke.tar" >/dev/null || die "ctr could not import the smoke image"

kc create namespace "$NS" >/dev/null
kc -n "$NS" apply -f - >/dev/null <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: pause}
spec:
  replicas: 2
  selector: {matchLabels: {app: pause}}
  template:
    metadata: {labels: {app: pause}}
    spec:
      containers:
        - {name: pause, image: drip.local/pause:1, imagePullPolicy: Never}
---
apiVersion: v1
kind: Service
metadata: {name: db}
spec:
  clusterIP: None
  publishNotReadyAddresses: true
  selector: {app: db}
  ports: [{name: http, port: 8080}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  replicas: 2
  podManagementPolicy: Parallel
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers:
        - name: smoke
          image: $IMAGE
          imagePullPolicy: Never
          args: [serve]
          securityContext: {runAsUser: 65532, runAsNonRoot: true}
          readinessProbe: {httpGet: {path: /, port: 8080}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: db-rr}
spec:
  selector: {app: db}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Pod
metadata: {name: client}
spec:
  containers:
    - {name: smoke, image: $IMAGE, imagePullPolicy: Never, args: [serve]}
EOF

kc -n "$NS" rollout status deployment/pause --timeout=90s >/dev/null || failed "the pause Deployment did not roll out"
kc -n "$NS" rollout status statefulset/db --timeout=90s >/dev/null || failed "the StatefulSet did not roll out"
kc -n "$NS" wait --for=condition=Ready pod/client --timeout=60s >/dev/null || failed "the client pod is not Ready"

ex() { kc -n "$NS" exec client -- /smoke "$@"; }
# retry CMD...: run CMD until it succeeds, for at most 45 s, and print its
# last output. A pod's DNS record follows its EndpointSlice by a moment, and
# CoreDNS caches a "no such host" for up to 30 s (cache 30, as in kind).
retry() {
  local deadline=$((SECONDS + 45)) out
  until out=$("$@" 2>&1); do
    [ $SECONDS -lt $deadline ] || { noklog <<<"$out"; return 1; }
    sleep 1
  done
  noklog <<<"$out"
}
# noklog drops kubectl's own log lines (klog's "E1125 21:35:35.834270 ...
# websocket.go:296] Unknown stream id 1, discarding message"), which are not
# the command's answer; a CI run failed comparing one to the expected name.
noklog() { grep -v '^[IWEF][0-9]\{4\} [0-9][0-9]:[0-9][0-9]:[0-9][0-9]\.[0-9]* ' || true; }
# resolves NAME IP: the client pod resolves NAME to IP.
resolves() {
  local out
  out=$(ex lookup "$1") || { echo "$out"; return 1; }
  echo "$out"
  grep -qw "$2" <<<"$out"
}
for i in 0 1; do
  name=db-$i.db.$NS.svc.cluster.local
  want=$(kc -n "$NS" get pod "db-$i" -o jsonpath='{.status.podIP}')
  got=$(retry resolves "$name" "$want") || failed "CoreDNS does not resolve $name to $want: $got"
  log "ok: $got"
  out=$(retry ex get "http://db-$i.db:8080/") || failed "cannot reach db-$i by its short name: $out"
  [ "$out" = "db-$i" ] || failed "db-$i.db:8080 answered '$out'"
done
out=$(retry ex get "http://db-rr.$NS.svc/") || failed "cannot reach the ClusterIP Service db-rr (kube-proxy): $out"
log "ok: ClusterIP Service db-rr answered by $out"
ver=$(ex apiserver) || failed "the API server is not reachable from a pod with its service account and kube-root-ca.crt: $ver"
log "ok: API server from a pod: $(grep -o '"gitVersion": *"[^"]*"' <<<"$ver")"
kc -n "$NS" logs db-0 >/dev/null || failed "kubectl logs does not work"
log "smoke test passed in $((SECONDS - t0))s"
