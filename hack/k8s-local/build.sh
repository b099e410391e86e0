#!/usr/bin/env bash
# Builds the Kubernetes, CoreDNS and helm binaries that k8s-local runs, from
# the Go module proxy, into $CACHE_DIR/<name>-<version>/bin. A binary set
# whose stamp (version, go.mod/go.sum, Go toolchain, flags) matches is reused,
# so only the first run on a machine pays the ~15 minutes of a cold build.
#
#   build.sh                      build what is missing
#   build.sh --update-module VER  rewrite k8s/go.mod for Kubernetes VER (v1.X.Y)
#
# K8S_BUILD_NICE=1 runs the compiler at nice 19 / idle I/O, for building
# beside other work; K8S_BUILD_P sets go build -p.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
# The wrapper module and go install need the go command's defaults: a
# GOFLAGS=-modfile=... meant for the drip module would break them.
export GOFLAGS=-buildvcs=false

update_module() {
  local ver=$1 minor mod
  [[ $ver =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || die "--update-module wants v1.X.Y, got $ver"
  minor="v0.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"
  mod=$(cd "$K8S_LOCAL_DIR/k8s" && go mod download -json "k8s.io/kubernetes@$ver" | sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')
  [ -f "$mod" ] || die "could not download k8s.io/kubernetes@$ver"
  (
    cd "$K8S_LOCAL_DIR/k8s"
    # Replaces of a previous version go first: a staging module may be gone.
    while read -r path; do go mod edit -dropreplace="$path"; done \
      < <(awk '$2 == "=>" && $1 ~ /^k8s\.io\// {print $1}' go.mod)
    # Every staging module k8s.io/kubernetes replaces into ./staging is
    # published as v0.X.Y; pin each one to the release's twin.
    {
      echo; echo 'replace ('
      awk -v v="$minor" '/=> \.\/staging\/src\// {printf "\t%s => %s %s\n", $1, $1, v}' "$mod"
      echo ')'
    } >>go.mod
    go mod edit -require="k8s.io/kubernetes@$ver"
    go mod tidy
  )
  log "k8s/go.mod now pins k8s.io/kubernetes $ver (staging modules $minor)"
}

if [ "${1:-}" = "--update-module" ]; then
  update_module "${2:?version}"
  exit 0
fi

run_go() {
  if [ "${K8S_BUILD_NICE:-0}" = 1 ]; then nice -n 19 ionice -c 3 go "$@"; else go "$@"; fi
}
gover=$(go env GOVERSION)
p=${K8S_BUILD_P:-$(nproc)}

# stamp_ok DIR KEY: DIR/bin holds a complete build for KEY.
stamp_ok() { [ -f "$1/stamp" ] && [ "$(cat "$1/stamp")" = "$2" ]; }

build_kubernetes() {
  local dir=$CACHE_DIR/kubernetes-$K8S_VERSION key commit date minor ldflags pkg t0
  key="$K8S_VERSION $gover $(cat "$K8S_LOCAL_DIR/k8s/go.mod" "$K8S_LOCAL_DIR/k8s/go.sum" | sha256sum | cut -c1-16)"
  if stamp_ok "$dir" "$key"; then log "kubernetes $K8S_VERSION: cached in $dir"; return; fi
  log "kubernetes $K8S_VERSION: building into $dir (cold: ~10-20 min on 2 cores plus ~1.5 min of downloads; from a warm Go build cache: ~2 min)"
  local info
  info=$(cd "$K8S_LOCAL_DIR/k8s" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION")
  commit=$(sed -n 's/^\t\t"Hash": "\([0-9a-f]*\)",\{0,1\}$/\1/p' <<<"$info" | head -1)
  date=$(sed -n 's/^\t"Time": "\(.*\)",\{0,1\}$/\1/p' <<<"$info" | head -1)
  [ -n "$date" ] || date=$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$(sed -n 's/^\t"Info": "\(.*\)",$/\1/p' <<<"$info")")
  minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  # Without these, kube-apiserver reports v0.0.0: kubectl version and charts
  # with a kubeVersion constraint then fail.
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitCommit=${commit:-unknown} -X $pkg.gitTreeState=clean -X $pkg.buildDate=${date:-1970-01-01T00:00:00Z}"
  done
  # Into a new directory, renamed when complete: a failed build keeps the
  # previous binaries.
  rm -rf "$dir.new"; mkdir -p "$dir.new/bin"
  cd "$K8S_LOCAL_DIR/k8s"
  t0=$SECONDS
  run_go mod download || die "downloading the modules of k8s.io/kubernetes $K8S_VERSION failed"
  log "kubernetes: modules downloaded in $((SECONDS - t0))s"
  t0=$SECONDS
  CGO_ENABLED=0 run_go build -p "$p" -trimpath -ldflags "$ldflags" -o "$dir.new/bin/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet \
    k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kubectl \
    || die "building Kubernetes $K8S_VERSION failed"
  log "kubernetes: built in $((SECONDS - t0))s"
  cd - >/dev/null
  "$dir.new/bin/kube-apiserver" --version | grep -qx "Kubernetes $K8S_VERSION" \
    || die "kube-apiserver does not report $K8S_VERSION: version ldflags not applied"
  echo "$key" >"$dir.new/stamp"
  rm -rf "$dir"; mv "$dir.new" "$dir"
}

# go_install NAME VERSION PKG LDFLAGS: `go install PKG@VERSION` into the cache.
go_install() {
  local name=$1 ver=$2 pkg=$3 ldflags=$4 dir key t0
  dir=$CACHE_DIR/$name-$ver
  key="$ver $gover $ldflags"
  if stamp_ok "$dir" "$key"; then log "$name $ver: cached in $dir"; return; fi
  log "$name $ver: building into $dir"
  rm -rf "$dir.new"; mkdir -p "$dir.new/bin"
  t0=$SECONDS
  # Outside any module, so the drip module's go.mod plays no part.
  (cd / && CGO_ENABLED=0 GOBIN="$dir.new/bin" run_go install -p "$p" -trimpath -ldflags "$ldflags" "$pkg@$ver") \
    || die "building $name $ver failed"
  [ -x "$dir.new/bin/$name" ] || die "go install $pkg@$ver made no $name binary"
  log "$name: built in $((SECONDS - t0))s"
  echo "$key" >"$dir.new/stamp"
  rm -rf "$dir"; mv "$dir.new" "$dir"
}

mkdir -p "$CACHE_DIR"
t_all=$SECONDS
build_kubernetes
go_install coredns "$COREDNS_VERSION" github.com/coredns/coredns "-s -w"
go_install helm "$HELM_VERSION" helm.sh/helm/v3/cmd/helm \
  "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
log "binaries ready in $((SECONDS - t_all))s: $K8S_BIN $COREDNS_BIN $HELM_BIN"
