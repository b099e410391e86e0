package ociimage

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Annotations on the index entry. containerd names an imported image after
// AnnotationImageName and falls back to AnnotationRefName.
const (
	AnnotationImageName = "io.containerd.image.name"
	AnnotationRefName   = "org.opencontainers.image.ref.name"
)

// WriteArchive writes img as an OCI image-layout tarball (oci-layout,
// index.json, blobs/sha256/*) that names the image ref, normalized. Entries
// are in a fixed order and dated at the epoch, so equal images give equal
// archives.
func WriteArchive(w io.Writer, ref string, img v1.Image) error {
	full, err := Normalize(ref)
	if err != nil {
		return err
	}
	manifest, err := img.RawManifest()
	if err != nil {
		return fmt.Errorf("image %s: manifest: %w", ref, err)
	}
	mdigest, err := img.Digest()
	if err != nil {
		return fmt.Errorf("image %s: manifest digest: %w", ref, err)
	}
	mt, err := img.MediaType()
	if err != nil {
		return fmt.Errorf("image %s: media type: %w", ref, err)
	}
	cfgName, err := img.ConfigName()
	if err != nil {
		return fmt.Errorf("image %s: config digest: %w", ref, err)
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		return fmt.Errorf("image %s: config: %w", ref, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return fmt.Errorf("image %s: config: %w", ref, err)
	}
	annotations := map[string]string{AnnotationImageName: full}
	if tag := tagOf(full); tag != "" {
		annotations[AnnotationRefName] = tag
	}
	index, err := json.Marshal(v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests: []v1.Descriptor{{
			MediaType:   mt,
			Size:        int64(len(manifest)),
			Digest:      mdigest,
			Annotations: annotations,
			Platform:    &v1.Platform{OS: cf.OS, Architecture: cf.Architecture},
		}},
	})
	if err != nil {
		return fmt.Errorf("image %s: index: %w", ref, err)
	}

	tw := tar.NewWriter(w)
	epoch := time.Unix(0, 0).UTC()
	writeEntry := func(name string, size int64, body io.Reader) error {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: size, ModTime: epoch, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("image %s: archive entry %s: %w", ref, name, err)
		}
		if _, err := io.Copy(tw, body); err != nil {
			return fmt.Errorf("image %s: archive entry %s: %w", ref, name, err)
		}
		return nil
	}
	writeBytes := func(name string, b []byte) error { return writeEntry(name, int64(len(b)), bytes.NewReader(b)) }
	blob := func(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }

	if err := writeBytes("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	if err := writeBytes("index.json", index); err != nil {
		return err
	}
	if err := writeBytes(blob(mdigest), manifest); err != nil {
		return err
	}
	if err := writeBytes(blob(cfgName), cfg); err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return fmt.Errorf("image %s: layers: %w", ref, err)
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return fmt.Errorf("image %s: layer digest: %w", ref, err)
		}
		size, err := l.Size()
		if err != nil {
			return fmt.Errorf("image %s: layer %s: %w", ref, d, err)
		}
		rc, err := l.Compressed()
		if err != nil {
			return fmt.Errorf("image %s: layer %s: %w", ref, d, err)
		}
		err = writeEntry(blob(d), size, rc)
		rc.Close()
		if err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("image %s: archive: %w", ref, err)
	}
	return nil
}

// WriteArchiveFile writes the archive to path, atomically: a reader never
// sees half an archive, and a failed write leaves no file.
func WriteArchiveFile(path, ref string, img v1.Image) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("image archive %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	// CreateTemp makes the file 0600; an archive is no secret.
	if err = f.Chmod(0o644); err != nil {
		return fmt.Errorf("image archive %s: %w", path, err)
	}
	if err = WriteArchive(f, ref, img); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("image archive %s: %w", path, err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("image archive %s: %w", path, err)
	}
	return nil
}
