package ociimage

import (
	"os"
)

// Users of the drip image, as in distroless's nonroot images: the chart runs
// the broker as 65532 and only the netem sidecar as root.
const (
	NonRootUID = 65532
	passwd     = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group = "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"
)

// hostCACerts is copied into the drip image when the build host has it, at
// the path Go's crypto/x509 reads first, so that drip trusts the public CAs
// as it does in the distroless image of deploy/Dockerfile.
const hostCACerts = "/etc/ssl/certs/ca-certificates.crt"

// Drip is the drip image, the Go-built twin of deploy/Dockerfile: the static
// binary at /usr/local/bin/drip, user 65532, the same entrypoint and ports.
func Drip(binary, version string) Spec {
	s := Spec{
		Files: []File{
			{Path: "/usr/local/bin/drip", Mode: 0o755, Source: binary},
			{Path: "/etc/passwd", Mode: 0o644, Data: []byte(passwd)},
			{Path: "/etc/group", Mode: 0o644, Data: []byte(group)},
		},
		Dirs: []Dir{
			{Path: "/tmp", Mode: 0o1777},
			{Path: "/home/nonroot", Mode: 0o700, UID: NonRootUID, GID: NonRootUID},
		},
		Entrypoint: []string{"/usr/local/bin/drip"},
		Cmd:        []string{"--help"},
		User:       "65532:65532",
		// client API, peer links, broker metrics, netem sidecar metrics
		ExposedPorts: []string{"7000/tcp", "7100/tcp", "9100/tcp", "9101/tcp"},
		Labels: map[string]string{
			"org.opencontainers.image.title":   "drip",
			"org.opencontainers.image.version": version,
		},
	}
	if _, err := os.Stat(hostCACerts); err == nil {
		s.Files = append(s.Files, File{Path: hostCACerts, Mode: 0o644, Source: hostCACerts})
	}
	return s
}

// Pause is the pod sandbox image: the static pause program (./pause) as
// /pause, run as 65535 like the upstream image.
func Pause(binary string) Spec {
	return Spec{
		Files:      []File{{Path: "/pause", Mode: 0o755, Source: binary}},
		Entrypoint: []string{"/pause"},
		User:       "65535:65535",
		Labels:     map[string]string{"org.opencontainers.image.title": "pause"},
	}
}

// CoreDNS is the cluster DNS image: a static coredns binary as /coredns,
// reading the Corefile the Deployment mounts (-conf /etc/coredns/Corefile).
// It runs as root to bind port 53, as the upstream image does.
func CoreDNS(binary, version string) Spec {
	return Spec{
		Files:        []File{{Path: "/coredns", Mode: 0o755, Source: binary}},
		Entrypoint:   []string{"/coredns"},
		ExposedPorts: []string{"53/tcp", "53/udp", "9153/tcp"},
		Labels: map[string]string{
			"org.opencontainers.image.title":   "coredns",
			"org.opencontainers.image.version": version,
		},
	}
}
