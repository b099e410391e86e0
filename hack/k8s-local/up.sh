#!/usr/bin/env bash
# Brings up a single-node Kubernetes cluster on this machine, as root and
# without systemd, Docker or a registry: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, containerd, kubelet, kube-proxy and
# CoreDNS, each a background process with a pidfile in $RUN_DIR and a log in
# $LOG_DIR. Images are OCI archives packed in Go and imported with ctr.
#
# On success it writes $RUN_DIR/kubeconfig and $RUN_DIR/env (KUBECONFIG,
# CONTAINERD_ADDRESS, PATH) and prints them. On failure it prints the failing
# component's log tail and exits non-zero; down.sh removes what is left.
# See docs/k8s-local.md.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || die "must run as root (it starts containerd, kubelet and kube-proxy)"
t_start=$SECONDS

# ---------------------------------------------------------------- settings
NODE_NAME=${DRIP_K8S_NODE_NAME:-drip-k8s}
API_PORT=${DRIP_K8S_API_PORT:-6443}
ETCD_PORT=${DRIP_K8S_ETCD_PORT:-2379}
ETCD_PEER_PORT=$((ETCD_PORT + 1))
SERVICE_CIDR=${DRIP_K8S_SERVICE_CIDR:-10.96.0.0/16}
API_SERVICE_IP=${DRIP_K8S_API_SERVICE_IP:-10.96.0.1}
DNS_IP=${DRIP_K8S_DNS_IP:-10.96.0.10}
POD_CIDR=${DRIP_K8S_POD_CIDR:-10.244.0.0/24}
CLUSTER_DOMAIN=cluster.local
BRIDGE=dripk8s0
PAUSE_IMAGE=drip.local/pause:1
COREDNS_IMAGE=drip.local/coredns:$COREDNS_VERSION
PKI=$STATE_DIR/pki
CTR_SOCK=$RUN_DIR/containerd/containerd.sock

# ---------------------------------------------------------------- helpers

# start NAME CMD...: run CMD in its own session, detached from this shell,
# with its pid in $RUN_DIR/NAME.pid and its output in $LOG_DIR/NAME.log.
start() {
  local name=$1; shift
  log "starting $name"
  setsid "$@" </dev/null >>"$LOG_DIR/$name.log" 2>&1 &
  echo $! >"$RUN_DIR/$name.pid"
}

# fail NAME MSG: the component NAME did not come up; show why and stop.
fail() {
  local name=$1; shift
  log "FAIL: $name: $*"
  if [ -f "$RUN_DIR/$name.pid" ] && ! kill -0 "$(cat "$RUN_DIR/$name.pid")" 2>/dev/null; then
    log "$name (pid $(cat "$RUN_DIR/$name.pid")) has exited"
  fi
  if [ -f "$LOG_DIR/$name.log" ]; then
    echo "----- last 60 lines of $LOG_DIR/$name.log -----" >&2
    tail -n 60 "$LOG_DIR/$name.log" >&2
    echo "----- end of $name.log -----" >&2
  fi
  log "the other logs are in $LOG_DIR; run 'make k8s-local-down' to clean up"
  exit 1
}

# wait_for NAME SECONDS CMD...: poll CMD every half second until it succeeds;
# fail NAME if it does not within SECONDS or NAME's process dies meanwhile.
wait_for() {
  local name=$1 secs=$2 deadline; shift 2
  deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if [ -f "$RUN_DIR/$name.pid" ] && ! kill -0 "$(cat "$RUN_DIR/$name.pid")" 2>/dev/null; then
      fail "$name" "exited while starting"
    fi
    [ $SECONDS -lt $deadline ] || fail "$name" "not ready after ${secs}s (waiting for: $*)"
    sleep 0.5
  done
}

kc() { kubectl --kubeconfig "$KUBECONFIG_PATH" "$@"; }

# ---------------------------------------------------------------- prerequisites

# Debian packages, installed without starting their services: the cluster
# runs its own etcd and containerd with its own config and state.
packages="etcd-server containerd runc containernetworking-plugins iptables conntrack openssl curl iproute2 procps mount util-linux"
missing=""
for p in $packages; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  log "installing Debian packages:$missing"
  guard=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    guard=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\nexit 101\n' >"$guard"; chmod +x "$guard"
  fi
  apt-get update -qq
  # shellcheck disable=SC2086 # one word per package
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null \
    || { [ -z "$guard" ] || rm -f "$guard"; die "apt-get install$missing failed"; }
  [ -z "$guard" ] || rm -f "$guard"
fi

"$K8S_LOCAL_DIR/build.sh"
for b in kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl; do
  [ -x "$K8S_BIN/$b" ] || die "$K8S_BIN/$b is missing after build.sh"
done

if [ -e "$RUN_DIR" ] || [ -e "$STATE_DIR" ]; then
  log "a previous cluster's state is here: tearing it down first"
  "$K8S_LOCAL_DIR/down.sh"
fi

# The node IP: the source address of the default route, else the first
# global IPv4 address. The API server listens there, not on loopback only,
# because pods reach it through the kubernetes Service's DNAT to this IP.
NODE_IP=${DRIP_K8S_NODE_IP:-}
if [ -z "$NODE_IP" ]; then
  dev=$(ip -4 route show default | awk '{for (i = 1; i < NF; i++) if ($i == "dev") {print $(i+1); exit}}')
  [ -z "$dev" ] || NODE_IP=$(ip -4 -o addr show dev "$dev" scope global | awk '{split($4, a, "/"); print a[1]; exit}')
  [ -n "$NODE_IP" ] || NODE_IP=$(ip -4 -o addr show scope global | awk '{split($4, a, "/"); print a[1]; exit}')
fi
[ -n "$NODE_IP" ] || die "no global IPv4 address to run the node on; set DRIP_K8S_NODE_IP"

for port in "$API_PORT" "$ETCD_PORT" "$ETCD_PEER_PORT" 10248 10250 10256 10257 10259; do
  if ss -Hltn "sport = :$port" | grep -q .; then
    die "TCP port $port is already in use: $(ss -Hltnp "sport = :$port" | head -1)"
  fi
done
for ctl in cpu cpuacct cpuset memory pids; do
  [ -d "/sys/fs/cgroup/$ctl" ] || [ -f /sys/fs/cgroup/cgroup.controllers ] \
    || die "cgroup controller $ctl is not mounted under /sys/fs/cgroup"
done

mkdir -p "$RUN_DIR" "$STATE_DIR" "$LOG_DIR" "$PKI" "$IMAGE_DIR" "$RUN_DIR/containerd" "$STATE_DIR/cni/net.d"
rm -f "$LOG_DIR"/*.log

# What down.sh must put back: the sysctls kubelet, kube-proxy and the bridge
# plugin change, and whether the shared directories containerd and kubelet
# write into existed before.
: >"$STATE_DIR/sysctls"
for s in net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables \
  vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops \
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.conf.all.route_localnet; do
  v=$(sysctl -n "$s" 2>/dev/null) && echo "$s=$v" >>"$STATE_DIR/sysctls"
done
: >"$STATE_DIR/created-dirs"
for d in /run/containerd /var/lib/kubelet /var/log/containers /var/run/netns /var/lib/cni; do
  [ -e "$d" ] || echo "$d" >>"$STATE_DIR/created-dirs"
done

# Pods on the bridge reach a Service backend on the same bridge: the reply
# is bridged, so it must pass through iptables to be un-DNATed.
sysctl -qw net.ipv4.ip_forward=1
modprobe br_netfilter 2>/dev/null || true
sysctl -qw net.bridge.bridge-nf-call-iptables=1 || die "net.bridge.bridge-nf-call-iptables cannot be set: is br_netfilter available?"

# ---------------------------------------------------------------- PKI
log "node $NODE_NAME at $NODE_IP: writing certificates"
openssl_quiet() { openssl "$@" 2>/dev/null; }
openssl_quiet ecparam -name prime256v1 -genkey -noout -out "$PKI/ca.key"
openssl_quiet req -x509 -new -key "$PKI/ca.key" -subj "/CN=drip-k8s-ca" -days 3650 -out "$PKI/ca.crt" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature"
# cert NAME SUBJECT EXT: a key and a CA-signed certificate.
cert() {
  local name=$1 subj=$2 ext=$3
  openssl_quiet ecparam -name prime256v1 -genkey -noout -out "$PKI/$name.key"
  openssl_quiet req -new -key "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr"
  printf 'keyUsage=critical,digitalSignature,keyEncipherment\n%s\n' "$ext" >"$PKI/$name.ext"
  openssl_quiet x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 365 -extfile "$PKI/$name.ext" -out "$PKI/$name.crt" || die "openssl could not sign $name"
  rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}
cert apiserver "/CN=kube-apiserver" "extendedKeyUsage=serverAuth
subjectAltName=IP:$NODE_IP,IP:$API_SERVICE_IP,IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.$CLUSTER_DOMAIN"
cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "extendedKeyUsage=clientAuth"
cert admin "/O=system:masters/CN=drip-k8s-admin" "extendedKeyUsage=clientAuth"
cert controller-manager "/CN=system:kube-controller-manager" "extendedKeyUsage=clientAuth"
cert scheduler "/CN=system:kube-scheduler" "extendedKeyUsage=clientAuth"
cert kube-proxy "/CN=system:kube-proxy" "extendedKeyUsage=clientAuth"
cert kubelet "/O=system:nodes/CN=system:node:$NODE_NAME" "extendedKeyUsage=clientAuth"
cert kubelet-serving "/O=system:nodes/CN=system:node:$NODE_NAME" "extendedKeyUsage=serverAuth
subjectAltName=IP:$NODE_IP,DNS:$NODE_NAME"
openssl_quiet genrsa -out "$PKI/sa.key" 2048
openssl_quiet rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub"
chmod 600 "$PKI"/*.key

# kubeconfig FILE NAME: a kubeconfig for the user with the certificate NAME.
kubeconfig() {
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
  - name: drip-k8s
    cluster:
      server: https://$NODE_IP:$API_PORT
      certificate-authority: $PKI/ca.crt
users:
  - name: $2
    user:
      client-certificate: $PKI/$2.crt
      client-key: $PKI/$2.key
contexts:
  - name: drip-k8s
    context: {cluster: drip-k8s, user: $2}
current-context: drip-k8s
EOF
}
for u in controller-manager scheduler kube-proxy kubelet; do kubeconfig "$STATE_DIR/$u.kubeconfig" "$u"; done
# The one for people and tests carries its certificates inline, so that it
# can be copied elsewhere.
kubeconfig "$KUBECONFIG_PATH.tmp" admin
kubectl --kubeconfig "$KUBECONFIG_PATH.tmp" config view --flatten --raw >"$KUBECONFIG_PATH"
rm -f "$KUBECONFIG_PATH.tmp"
chmod 600 "$KUBECONFIG_PATH"

# ---------------------------------------------------------------- control plane
start etcd etcd --name "$NODE_NAME" --data-dir "$STATE_DIR/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "$NODE_NAME=http://127.0.0.1:$ETCD_PEER_PORT" --initial-cluster-state new \
  --initial-cluster-token drip-k8s --quota-backend-bytes 2147483648 --log-level warn

# containerd starts beside etcd: neither needs the other, and both need a
# few seconds.
cat >"$STATE_DIR/containerd.toml" <<EOF
# containerd for hack/k8s-local: its own socket, root and state, so that it
# never meets a packaged or Docker's containerd.
version = 2
root = "$STATE_DIR/containerd"
state = "$RUN_DIR/containerd/state"
[grpc]
  address = "$CTR_SOCK"
[ttrpc]
  address = "$CTR_SOCK.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$STATE_DIR/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # Root here lacks CAP_SYS_RESOURCE: runc cannot lower oom_score_adj, and
  # without this every sandbox fails with "can't get final child's PID
  # from pipe: EOF".
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$RUN_DIR/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$STATE_DIR/cni/net.d"
    max_conf_num = 1
EOF
cat >"$STATE_DIR/cni/net.d/10-drip-k8s.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "drip-k8s",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$POD_CIDR"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "$STATE_DIR/cni/networks"
      }
    }
  ]
}
EOF
start containerd containerd --config "$STATE_DIR/containerd.toml"

wait_for etcd 60 curl -fsS "http://127.0.0.1:$ETCD_PORT/health"

start kube-apiserver kube-apiserver \
  --advertise-address="$NODE_IP" --bind-address="$NODE_IP" --secure-port="$API_PORT" \
  --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
  --service-cluster-ip-range="$SERVICE_CIDR" \
  --client-ca-file="$PKI/ca.crt" \
  --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
  --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
  --kubelet-certificate-authority="$PKI/ca.crt" --kubelet-preferred-address-types=InternalIP \
  --service-account-issuer="https://kubernetes.default.svc.$CLUSTER_DOMAIN" \
  --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
  --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
  --allow-privileged=true --profiling=false --cert-dir="$STATE_DIR/apiserver" --v=0
wait_for kube-apiserver 120 kc get --raw /readyz

start kube-controller-manager kube-controller-manager \
  --kubeconfig="$STATE_DIR/controller-manager.kubeconfig" \
  --authentication-kubeconfig="$STATE_DIR/controller-manager.kubeconfig" \
  --authorization-kubeconfig="$STATE_DIR/controller-manager.kubeconfig" \
  --bind-address=127.0.0.1 --leader-elect=false \
  --root-ca-file="$PKI/ca.crt" \
  --service-account-private-key-file="$PKI/sa.key" --use-service-account-credentials=true \
  --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
  --service-cluster-ip-range="$SERVICE_CIDR" --cluster-name=drip-k8s \
  --controllers='*,-bootstrapsigner,-tokencleaner' --profiling=false --v=0
start kube-scheduler kube-scheduler \
  --kubeconfig="$STATE_DIR/scheduler.kubeconfig" \
  --authentication-kubeconfig="$STATE_DIR/scheduler.kubeconfig" \
  --authorization-kubeconfig="$STATE_DIR/scheduler.kubeconfig" \
  --bind-address=127.0.0.1 --leader-elect=false --profiling=false --v=0

# ---------------------------------------------------------------- images
wait_for containerd 60 ctr --address "$CTR_SOCK" version
log "packing and importing the pause and CoreDNS images"
(
  cd "$REPO_ROOT"
  go build -trimpath -o "$IMAGE_DIR/ociimage" ./cmd/ociimage
  "$IMAGE_DIR/ociimage" pause -ref "$PAUSE_IMAGE" -o "$IMAGE_DIR/pause.tar"
  "$IMAGE_DIR/ociimage" coredns -bin "$COREDNS_BIN/coredns" -version "$COREDNS_VERSION" \
    -ref "$COREDNS_IMAGE" -o "$IMAGE_DIR/coredns.tar"
) || die "could not pack the pause and CoreDNS images"
for img in pause coredns; do
  ctr --address "$CTR_SOCK" -n k8s.io images import "$IMAGE_DIR/$img.tar" >/dev/null \
    || fail containerd "ctr images import $IMAGE_DIR/$img.tar failed"
done

# ---------------------------------------------------------------- node
mkdir -p "$STATE_DIR/kubelet" "$LOG_DIR/pods"
cat >"$STATE_DIR/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# No systemd as PID 1 and a cgroup v1 host: cgroupfs. The host has swap
# on some machines and the tests do not care: do not refuse to start.
cgroupDriver: cgroupfs
failSwapOn: false
containerRuntimeEndpoint: unix://$CTR_SOCK
address: $NODE_IP
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $PKI/kubelet-serving.crt
tlsPrivateKeyFile: $PKI/kubelet-serving.key
clusterDomain: $CLUSTER_DOMAIN
clusterDNS: [$DNS_IP]
podLogsDir: $LOG_DIR/pods
# The disk is shared with builds and the module cache; do not evict pods or
# delete the imported images (they cannot be pulled again).
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
maxPods: 110
EOF
start kubelet kubelet --config="$STATE_DIR/kubelet.yaml" --kubeconfig="$STATE_DIR/kubelet.kubeconfig" \
  --root-dir="$STATE_DIR/kubelet" --hostname-override="$NODE_NAME" --node-ip="$NODE_IP" --v=1

cat >"$STATE_DIR/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: $STATE_DIR/kube-proxy.kubeconfig}
hostnameOverride: $NODE_NAME
clusterCIDR: $POD_CIDR
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# Leave the host's conntrack sysctls and route_localnet alone.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {localhostNodePorts: false}
EOF
start kube-proxy kube-proxy --config="$STATE_DIR/kube-proxy.yaml" --v=0

wait_for kubelet 120 kc get node "$NODE_NAME"
wait_for kubelet 120 kc wait --for=condition=Ready "node/$NODE_NAME" --timeout=2s
wait_for kube-proxy 60 curl -fsS "http://127.0.0.1:10256/healthz"
wait_for kube-controller-manager 60 kc -n default get serviceaccount default

# ---------------------------------------------------------------- add-ons
sed -e "s|@@COREDNS_IMAGE@@|$COREDNS_IMAGE|g" -e "s|@@DNS_IP@@|$DNS_IP|g" -e "s|@@CLUSTER_DOMAIN@@|$CLUSTER_DOMAIN|g" \
  "$K8S_LOCAL_DIR/manifests/coredns.yaml" | kc apply -f - >/dev/null
if ! kc -n kube-system rollout status deployment/coredns --timeout=120s >/dev/null; then
  kc -n kube-system get pods -o wide >&2 || true
  kc -n kube-system describe pods -l k8s-app=kube-dns 2>&1 | tail -n 30 >&2 || true
  kc -n kube-system logs -l k8s-app=kube-dns --tail=30 >&2 || true
  fail kubelet "CoreDNS did not become ready"
fi

cat >"$RUN_DIR/env" <<EOF
export KUBECONFIG=$KUBECONFIG_PATH
export CONTAINERD_ADDRESS=$CTR_SOCK
export PATH=$K8S_BIN:$HELM_BIN:\$PATH
EOF
log "cluster up in $((SECONDS - t_start))s: Kubernetes $(kc version -o json | sed -n 's/.*"gitVersion": "\(v[^"]*\)".*/\1/p' | tail -1), node $NODE_NAME ($NODE_IP)"
cat "$RUN_DIR/env"
