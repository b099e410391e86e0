package ociimage

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BuildGo compiles the main package pkg of the Go module at dir into a
// static linux binary at out (no cgo: the images have no libc), with
// -trimpath and the given extra -ldflags. It runs the go command on PATH.
func BuildGo(ctx context.Context, dir, pkg, out, ldflags string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", strings.TrimSpace("-s -w "+ldflags), "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s in %s: %w\n%s", pkg, dir, err, stderr.Bytes())
	}
	return nil
}

// ArchiveRequest asks for the image archive of one of the project's images.
type ArchiveRequest struct {
	Root    string // the drip module root (the directory of its go.mod)
	Ref     string // the name the image carries, e.g. drip:dev
	Version string // stamped into the binary and the image label; empty: Ref's tag
	Path    string // where to write the archive
}

// DripArchive builds ./cmd/drip of the module at req.Root as deploy/Dockerfile
// does and writes the image archive to req.Path.
func DripArchive(ctx context.Context, req ArchiveRequest) error {
	version, err := versionOf(req)
	if err != nil {
		return err
	}
	return buildAndArchive(ctx, req, "./cmd/drip",
		"-X github.com/dripmesh/drip/internal/buildinfo.Version="+version,
		func(bin string) Spec { return Drip(bin, version) })
}

// PauseArchive builds the pause program of this package and writes the pod
// sandbox image archive to req.Path.
func PauseArchive(ctx context.Context, req ArchiveRequest) error {
	return buildAndArchive(ctx, req, "./internal/ociimage/pause", "", Pause)
}

func versionOf(req ArchiveRequest) (string, error) {
	if req.Version != "" {
		return req.Version, nil
	}
	full, err := Normalize(req.Ref)
	if err != nil {
		return "", err
	}
	if tag := tagOf(full); tag != "" {
		return tag, nil
	}
	return "dev", nil
}

func buildAndArchive(ctx context.Context, req ArchiveRequest, pkg, ldflags string, spec func(bin string) Spec) error {
	if _, err := Normalize(req.Ref); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "ociimage-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, filepath.Base(pkg))
	if err := BuildGo(ctx, req.Root, pkg, bin, ldflags); err != nil {
		return err
	}
	img, err := Build(spec(bin))
	if err != nil {
		return fmt.Errorf("image %s: %w", req.Ref, err)
	}
	return WriteArchiveFile(req.Path, req.Ref, img)
}
