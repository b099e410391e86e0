# shellcheck shell=bash disable=SC2034
# Shared by the hack/k8s-local scripts: paths, versions and small helpers.
# Sourced, not run.

K8S_LOCAL_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$K8S_LOCAL_DIR/../.." && pwd)
# shellcheck source=versions.env
. "$K8S_LOCAL_DIR/versions.env"
K8S_VERSION=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' "$K8S_LOCAL_DIR/k8s/go.mod")

# Binaries outlive the cluster and the checkout: a second run on the same
# machine reuses them. Everything else is per cluster and removed by down.sh.
CACHE_DIR=${DRIP_K8S_CACHE:-/var/cache/drip-k8s}
RUN_DIR=${DRIP_K8S_RUN:-/var/run/drip-k8s}
LOG_DIR=${DRIP_K8S_LOG:-/var/log/drip-k8s}
STATE_DIR=${DRIP_K8S_STATE:-/var/lib/drip-k8s}
K8S_BIN=$CACHE_DIR/kubernetes-$K8S_VERSION/bin
COREDNS_BIN=$CACHE_DIR/coredns-$COREDNS_VERSION/bin
HELM_BIN=$CACHE_DIR/helm-$HELM_VERSION/bin
IMAGE_DIR=$CACHE_DIR/images
KUBECONFIG_PATH=$RUN_DIR/kubeconfig

export PATH="/usr/local/go/bin:$K8S_BIN:$HELM_BIN:$PATH"

log() { printf '%s [k8s-local] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }
