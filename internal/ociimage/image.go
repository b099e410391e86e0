package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// File is one regular file of an image's layer.
type File struct {
	// Path is where the file is in the image: absolute and clean, e.g.
	// /usr/local/bin/drip. Its parent directories are created 0755.
	Path string
	// Mode is the permission bits, e.g. 0755 for a binary.
	Mode int64
	// Exactly one of Data and Source gives the content: the bytes, or a
	// host file to copy (read when the image is built).
	Data   []byte
	Source string
}

// Dir is a directory of the layer with its own mode or owner, e.g. /tmp
// with 01777. Directories not given are created 0755 and owned by root.
type Dir struct {
	Path     string
	Mode     int64
	UID, GID int
}

// Spec describes a single-layer image.
type Spec struct {
	Files []File
	Dirs  []Dir

	Entrypoint []string
	Cmd        []string
	// User as in a Dockerfile's USER, e.g. "65532:65532"; empty is root.
	User       string
	Env        []string
	WorkingDir string
	// ExposedPorts as "7000/tcp"; documentation for people and tools.
	ExposedPorts []string
	Labels       map[string]string

	// Created dates the image and every layer entry; zero means the Unix
	// epoch, so that builds of the same files are byte-identical.
	Created time.Time
	// Architecture defaults to the one this program runs on; the binaries
	// must match it (they are built for GOARCH by BuildGo).
	Architecture string
}

// Build packs the Spec into an image with one gzip layer, OCI media types
// and a linux config.
func Build(spec Spec) (v1.Image, error) {
	layerTar, err := layerBytes(spec)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)

	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS = "linux"
	cf.Architecture = spec.Architecture
	if cf.Architecture == "" {
		cf.Architecture = runtime.GOARCH
	}
	cf.Created = v1.Time{Time: created(spec)}
	cf.Config = v1.Config{
		Entrypoint: spec.Entrypoint,
		Cmd:        spec.Cmd,
		User:       spec.User,
		Env:        spec.Env,
		WorkingDir: spec.WorkingDir,
		Labels:     spec.Labels,
	}
	if len(cf.Config.Env) == 0 {
		cf.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	}
	if len(spec.ExposedPorts) > 0 {
		cf.Config.ExposedPorts = map[string]struct{}{}
		for _, p := range spec.ExposedPorts {
			cf.Config.ExposedPorts[p] = struct{}{}
		}
	}
	cf.History = []v1.History{{Created: cf.Created, CreatedBy: "ociimage", Comment: "static binaries, no base image"}}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	return img, nil
}

func created(spec Spec) time.Time {
	if spec.Created.IsZero() {
		return time.Unix(0, 0).UTC()
	}
	return spec.Created.UTC()
}

// layerBytes writes the uncompressed layer: every directory (given or
// implied by a file) before its contents, in sorted order.
func layerBytes(spec Spec) ([]byte, error) {
	type entry struct {
		hdr  tar.Header
		data []byte
	}
	entries := map[string]*entry{}
	mtime := created(spec)
	addDir := func(d Dir, explicit bool) error {
		if e, ok := entries[d.Path]; ok {
			if e.hdr.Typeflag != tar.TypeDir {
				return fmt.Errorf("image path %s is both a file and a directory", d.Path)
			}
			if explicit {
				e.hdr.Mode, e.hdr.Uid, e.hdr.Gid = d.Mode, d.UID, d.GID
			}
			return nil
		}
		entries[d.Path] = &entry{hdr: tar.Header{
			Typeflag: tar.TypeDir, Name: d.Path[1:] + "/", Mode: d.Mode, Uid: d.UID, Gid: d.GID, ModTime: mtime,
		}}
		return nil
	}
	addParents := func(p string) error {
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if err := addDir(Dir{Path: d, Mode: 0o755}, false); err != nil {
				return err
			}
		}
		return nil
	}
	for _, d := range spec.Dirs {
		if err := checkPath(d.Path); err != nil {
			return nil, err
		}
		if err := addParents(d.Path); err != nil {
			return nil, err
		}
		if err := addDir(d, true); err != nil {
			return nil, err
		}
	}
	for _, f := range spec.Files {
		if err := checkPath(f.Path); err != nil {
			return nil, err
		}
		data := f.Data
		switch {
		case f.Source != "" && f.Data != nil:
			return nil, fmt.Errorf("image file %s: both Data and Source given", f.Path)
		case f.Source != "":
			var err error
			if data, err = os.ReadFile(f.Source); err != nil {
				return nil, fmt.Errorf("image file %s: %w", f.Path, err)
			}
		}
		if _, dup := entries[f.Path]; dup {
			return nil, fmt.Errorf("image path %s given twice", f.Path)
		}
		if err := addParents(f.Path); err != nil {
			return nil, err
		}
		entries[f.Path] = &entry{
			hdr:  tar.Header{Typeflag: tar.TypeReg, Name: f.Path[1:], Mode: f.Mode, Size: int64(len(data)), ModTime: mtime},
			data: data,
		}
	}

	names := make([]string, 0, len(entries))
	for p := range entries {
		names = append(names, p)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range names {
		e := entries[p]
		e.hdr.Format = tar.FormatPAX
		if err := tw.WriteHeader(&e.hdr); err != nil {
			return nil, fmt.Errorf("image path %s: %w", p, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("image path %s: %w", p, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	return buf.Bytes(), nil
}

func checkPath(p string) error {
	if !path.IsAbs(p) || path.Clean(p) != p || p == "/" || strings.ContainsRune(p, 0) {
		return fmt.Errorf("image path %q must be absolute, clean and not /", p)
	}
	return nil
}
