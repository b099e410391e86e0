// Command ociimage writes the project's container images as OCI archives for
// `ctr -n k8s.io images import`, without Docker or a registry (see
// internal/ociimage and docs/k8s-local.md):
//
//	ociimage drip    -ref drip:dev -o drip.tar [-version v0.1.0]
//	ociimage pause   -ref drip.local/pause:1 -o pause.tar
//	ociimage coredns -bin /path/coredns -ref drip.local/coredns:v1.11.4 -o coredns.tar
//	ociimage static  (-bin FILE | -pkg ./go/pkg) -ref REF -o OUT [-path /name] [-user U]
//
// It is a separate binary so that drip itself does not link the image code.
// Run it from the repository (go run ./cmd/ociimage ...): drip, pause and
// -pkg are built from the module found from the working directory.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/dripmesh/drip/internal/ociimage"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "ociimage:", err)
		os.Exit(1)
	}
}

const usage = `usage: ociimage drip|pause|coredns|static [flags]; ociimage CMD -h for the flags`

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	fs := flag.NewFlagSet("ociimage "+args[0], flag.ContinueOnError)
	ref := fs.String("ref", "", "image reference the archive names, e.g. drip:dev (required)")
	out := fs.String("o", "", "archive file to write (required)")
	version := fs.String("version", "", "version stamped into the binary and image label (default: the ref's tag)")
	bin := fs.String("bin", "", "static binary to pack (coredns, static)")
	pkg := fs.String("pkg", "", "static: Go main package of this module to build and pack instead of -bin")
	inImage := fs.String("path", "", "static: path of the binary in the image (default: /<binary name>)")
	user := fs.String("user", "", "static: user the image runs as (default: root)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *ref == "" || *out == "" || fs.NArg() > 0 {
		return fmt.Errorf("%s: -ref and -o are required and no arguments are taken", fs.Name())
	}
	root, err := moduleRoot(ctx)
	req := ociimage.ArchiveRequest{Root: root, Ref: *ref, Version: *version, Path: *out}
	switch args[0] {
	case "drip":
		if err != nil {
			return err
		}
		return ociimage.DripArchive(ctx, req)
	case "pause":
		if err != nil {
			return err
		}
		return ociimage.PauseArchive(ctx, req)
	case "coredns":
		if *bin == "" {
			return errors.New("coredns: -bin is required")
		}
		return archive(req, ociimage.CoreDNS(*bin, *version))
	case "static":
		if (*bin == "") == (*pkg == "") {
			return errors.New("static: give exactly one of -bin and -pkg")
		}
		if *pkg != "" {
			if err != nil {
				return err
			}
			tmp, err := os.MkdirTemp("", "ociimage-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(tmp)
			*bin = filepath.Join(tmp, filepath.Base(*pkg))
			if err := ociimage.BuildGo(ctx, root, *pkg, *bin, ""); err != nil {
				return err
			}
		}
		p := *inImage
		if p == "" {
			p = "/" + filepath.Base(*bin)
		}
		return archive(req, ociimage.Spec{
			Files:      []ociimage.File{{Path: p, Mode: 0o755, Source: *bin}},
			Dirs:       []ociimage.Dir{{Path: "/tmp", Mode: 0o1777}},
			Entrypoint: []string{p},
			User:       *user,
		})
	default:
		return fmt.Errorf("unknown image %q; %s", args[0], usage)
	}
}

func archive(req ociimage.ArchiveRequest, spec ociimage.Spec) error {
	img, err := ociimage.Build(spec)
	if err != nil {
		return fmt.Errorf("image %s: %w", req.Ref, err)
	}
	return ociimage.WriteArchiveFile(req.Path, req.Ref, img)
}

// moduleRoot is the directory of the main module's go.mod, where the drip
// and pause packages are built.
func moduleRoot(ctx context.Context) (string, error) {
	b, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(b))
	if err != nil || gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("run ociimage inside the drip module (go env GOMOD: %q, %v)", gomod, err)
	}
	return filepath.Dir(gomod), nil
}
