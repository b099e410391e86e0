#!/usr/bin/env bash
# Lists whatever a k8s-local cluster left on this machine and exits 1 if
# anything is there: run it after down.sh (make k8s-local-down does). It
# looks for the things themselves, not at what up.sh recorded.
set -uo pipefail
. "$(dirname "$0")/lib.sh"

BRIDGE=dripk8s0
found=0
leftover() {
  found=1
  printf 'leftover %s:\n' "$1"
  sed 's/^/  /'
}
check() { # check WHAT OUTPUT
  [ -z "$2" ] || leftover "$1" <<<"$2"
}

# shellcheck disable=SC2009 # pgrep cannot print the command lines
check processes "$(ps -eo pid=,args= | grep -E "($STATE_DIR|$RUN_DIR|$K8S_BIN/|containerd-shim-runc-v2 .*drip-k8s)" | grep -vE 'grep -E|check-clean' || true)"
check "pod containers (processes in kubepods cgroups)" "$(cat /sys/fs/cgroup/*/kubepods/cgroup.procs /sys/fs/cgroup/kubepods/cgroup.procs 2>/dev/null || true)"
check mounts "$(awk '{print $5}' /proc/self/mountinfo | grep -E "^($STATE_DIR|/run/drip-k8s|$RUN_DIR|/run/netns/cni-|/run/containerd|/var/lib/kubelet)" || true)"
check "network namespaces" "$(for ns in /run/netns/cni-*; do [ -e "$ns" ] && echo "$ns"; done)"
check "network interfaces" "$(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E "^($BRIDGE|veth[0-9a-f]{8})$" || true)"
ipt=""
for v in "" -legacy -nft; do
  for save in "iptables$v-save" "ip6tables$v-save"; do
    command -v "$save" >/dev/null || continue
    out=$("$save" 2>/dev/null | grep -E '^:(KUBE-|CNI-)|-j (KUBE-|CNI-)' | sed "s/^/$save: /")
    [ -z "$out" ] || ipt="$ipt$out"$'\n'
  done
done
check "iptables rules and chains" "$(sed '/^$/d' <<<"$ipt" | sort -u)"
check cgroups "$(ls -d /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods 2>/dev/null || true)"
# /run/containerd and /var/lib/kubelet are ours only when no other
# containerd or kubelet runs here (Docker's containerd uses the first).
shared=()
pgrep -x containerd >/dev/null || shared+=(/run/containerd)
pgrep -x kubelet >/dev/null || shared+=(/var/lib/kubelet)
check files "$(ls -d "$STATE_DIR" "$RUN_DIR" "$LOG_DIR" "${shared[@]}" 2>/dev/null || true;
  find /var/log/containers -maxdepth 1 -lname "$LOG_DIR/*" 2>/dev/null || true
  for r in /var/lib/cni/results/drip-k8s-*; do [ -e "$r" ] && echo "$r"; done)"

if [ $found = 1 ]; then
  log "the machine is not clean (see above); make k8s-local-down removes these"
  exit 1
fi
log "clean: no k8s-local process, mount, netns, interface, iptables rule, cgroup or file is left"
