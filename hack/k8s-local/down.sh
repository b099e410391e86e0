#!/usr/bin/env bash
# Tears down the cluster up.sh made and everything it left on the machine:
# processes, pod containers, mounts, network namespaces, the bridge and its
# veths, the KUBE-* and CNI-* iptables chains, the kubepods cgroups, the
# sysctls it changed, and its state, run and log directories. The binary
# cache survives. Safe to run any number of times, and after a crash: every
# step works from what is on the machine, not from what up.sh recorded.
#
#   down.sh [--keep-logs]   --keep-logs leaves $LOG_DIR for a post-mortem
set -uo pipefail
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || die "must run as root"
keep_logs=0
[ "${1:-}" = "--keep-logs" ] && keep_logs=1
CTR_SOCK=$RUN_DIR/containerd/containerd.sock
BRIDGE=dripk8s0

# pids_of NAME: the pid in NAME's pidfile if that process is still NAME's
# binary, plus any process running one of our binaries with our paths
# (after a crash the pidfiles may be gone).
pids_of() {
  local name=$1 pid
  if [ -f "$RUN_DIR/$name.pid" ]; then
    pid=$(cat "$RUN_DIR/$name.pid")
    [ -d "/proc/$pid" ] && echo "$pid"
  fi
  pgrep -f -- "^([^ ]*/)?$name .*($STATE_DIR|$RUN_DIR)" || true
}

# stop NAME...: TERM, wait up to 10 s, then KILL.
stop() {
  local name p deadline alive
  local -a pids=()
  for name in "$@"; do
    while read -r p; do [ -n "$p" ] && pids+=("$p"); done < <(pids_of "$name" | sort -u)
  done
  [ ${#pids[@]} -gt 0 ] || return 0
  log "stopping $* (pids ${pids[*]})"
  kill -TERM "${pids[@]}" 2>/dev/null
  deadline=$((SECONDS + 10))
  while [ $SECONDS -lt $deadline ]; do
    alive=0
    for p in "${pids[@]}"; do [ -d "/proc/$p" ] && alive=1; done
    [ $alive = 1 ] || return 0
    sleep 0.2
  done
  log "killing $* (did not exit on TERM)"
  kill -KILL "${pids[@]}" 2>/dev/null
  sleep 0.5
}

# kubelet first, so that it restarts nothing while containers are removed.
stop kubelet kube-proxy
stop kube-controller-manager kube-scheduler

# The pods' containers: politely through containerd while it runs...
if [ -S "$CTR_SOCK" ] && ctr --address "$CTR_SOCK" version >/dev/null 2>&1; then
  c="ctr --address $CTR_SOCK -n k8s.io"
  for t in $($c tasks ls -q 2>/dev/null); do $c tasks kill -s SIGKILL "$t" >/dev/null 2>&1; done
  sleep 0.5
  for t in $($c tasks ls -q 2>/dev/null); do $c tasks delete -f "$t" >/dev/null 2>&1; done
  for ct in $($c containers ls -q 2>/dev/null); do $c containers delete "$ct" >/dev/null 2>&1; done
fi
# ...and by force: every process in a kubepods cgroup is a container's.
for root in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
  [ -d "$root" ] || continue
  find "$root" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u | xargs -r kill -KILL 2>/dev/null
done
# The shims of our containerd (they outlive it by design).
pgrep -f -- "containerd-shim-runc-v2 .*-address $CTR_SOCK" | xargs -r kill -KILL 2>/dev/null
stop containerd
stop kube-apiserver
stop etcd
rm -f "$RUN_DIR"/*.pid

# Mounts: container rootfs and shm, pod volumes, network namespaces. Deepest
# first; a lazy unmount when something still holds one.
mounts() {
  awk '{print $5}' /proc/self/mountinfo | sed 's/\\040/ /g' | grep -E \
    "^($STATE_DIR|$(readlink -f "$RUN_DIR")|$RUN_DIR|/run/netns/cni-|/run/containerd)" | sort -r
}
while read -r m; do
  [ -n "$m" ] || continue
  umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "cannot unmount $m"
done < <(mounts)

# Network namespaces containerd made for pod sandboxes (cni-<uuid>); the
# host ends of their veths vanish with them.
for ns in /run/netns/cni-*; do
  [ -e "$ns" ] || continue
  umount "$ns" 2>/dev/null; rm -f "$ns"
done
ip link show "$BRIDGE" >/dev/null 2>&1 && ip link delete "$BRIDGE"
for v in $(ip -o link show type veth 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E '^veth[0-9a-f]{8}$'); do
  if ip -d link show "$v" 2>/dev/null | grep -q "master $BRIDGE\|link-netns cni-"; then ip link delete "$v" 2>/dev/null; fi
done

# iptables: kube-proxy's and kubelet's KUBE-* chains and the bridge plugin's
# CNI-* chains, with the rules that jump to them, in every table. Each table
# is rewritten in one iptables-restore, so rules of others stay as they are.
clean_iptables() {
  local save=$1 restore=$2 table dump clean
  command -v "$save" >/dev/null || return 0
  for table in filter nat mangle raw; do
    dump=$("$save" -t "$table" 2>/dev/null) || continue
    grep -qE '(KUBE-|CNI-)' <<<"$dump" || continue
    clean=$(grep -vE '^:(KUBE-|CNI-)|^-A (KUBE-|CNI-)|-j (KUBE-|CNI-)|-g (KUBE-|CNI-)' <<<"$dump")
    "$restore" -T "$table" <<<"$clean" || log "$restore could not clean table $table"
  done
}
for v in "" -legacy -nft; do
  clean_iptables "iptables$v-save" "iptables$v-restore"
  clean_iptables "ip6tables$v-save" "ip6tables$v-restore"
done

# cgroups kubelet made (cgroupfs driver): empty now, removed leaf first.
for root in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
  [ -d "$root" ] || continue
  find "$root" -depth -type d -exec rmdir {} + 2>/dev/null
  [ -d "$root" ] && { sleep 1; find "$root" -depth -type d -exec rmdir {} + 2>/dev/null; }
  [ -d "$root" ] && log "cannot remove cgroup $root"
done

# Sysctls back as they were.
if [ -f "$STATE_DIR/sysctls" ]; then
  while IFS= read -r kv; do sysctl -qw "$kv" 2>/dev/null || log "cannot restore sysctl $kv"; done <"$STATE_DIR/sysctls"
fi

# Files outside our directories: pod log links, shim sockets, and the
# shared directories if we created them.
if [ -d /var/log/containers ]; then
  find /var/log/containers -maxdepth 1 -type l -lname "$LOG_DIR/*" -delete 2>/dev/null
fi
# libcni caches each attachment's result in /var/lib/cni/results (not
# configurable in containerd 1.6); pods removed by force leave theirs.
for r in /var/lib/cni/results/drip-k8s-*; do
  [ -e "$r" ] || continue
  id=${r#/var/lib/cni/results/drip-k8s-}; id=${id%-*}
  rm -f "$r" "/var/lib/cni/results/cni-loopback-$id-lo"
done
if [ -f "$STATE_DIR/created-dirs" ]; then
  while IFS= read -r d; do
    case $d in
      # Only our shims' sockets, kubelet's fixed-path sockets and our pods'
      # log links are there.
      /run/containerd | /var/lib/kubelet | /var/log/containers) rm -rf "$d" ;;
      /var/lib/cni) rmdir /var/lib/cni/results /var/lib/cni 2>/dev/null ;;
      *) rmdir "$d" 2>/dev/null ;;
    esac
  done <"$STATE_DIR/created-dirs"
fi

rm -rf "$STATE_DIR" "$RUN_DIR"
[ $keep_logs = 1 ] || rm -rf "$LOG_DIR"
log "down"
