package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNormalize(t *testing.T) {
	tests := []struct{ in, want, err string }{
		{in: "drip:dev", want: "docker.io/library/drip:dev"},
		{in: "drip", want: "docker.io/library/drip:latest"},
		{in: "dripmesh/drip:v1", want: "docker.io/dripmesh/drip:v1"},
		{in: "docker.io/drip:1", want: "docker.io/library/drip:1"},
		{in: "index.docker.io/library/drip:1", want: "docker.io/library/drip:1"},
		{in: "drip.local/pause:1", want: "drip.local/pause:1"},
		{in: "localhost/drip", want: "localhost/drip:latest"},
		{in: "localhost:5000/a/b:c", want: "localhost:5000/a/b:c"},
		{in: "ghcr.io/x/y@sha256:" + strings.Repeat("a", 64), want: "ghcr.io/x/y@sha256:" + strings.Repeat("a", 64)},
		{in: "", err: "empty"},
		{in: "Drip:dev", err: `"Drip:dev"`},
		{in: "drip:bad tag", err: "drip:bad tag"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := Normalize(tt.in)
			if tt.err != "" {
				require.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// FuzzNormalize: a reference that normalizes is a fixed point of Normalize
// and parses as the same name in go-containerregistry's grammar.
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"drip:dev", "a/b/c", "localhost:1/x", "x.y/z@sha256:" + strings.Repeat("0", 64), ":", "a//b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		full, err := Normalize(ref)
		if err != nil {
			return
		}
		again, err := Normalize(full)
		require.NoError(t, err, "normalized %q to %q", ref, full)
		require.Equal(t, full, again)
		_, err = name.ParseReference(full, name.StrictValidation)
		require.NoError(t, err, "normalized %q to %q", ref, full)
	})
}

// archive is an archive read back and checked for content addressing.
type archive struct {
	order    []string
	index    v1.IndexManifest
	manifest v1.Manifest
	config   v1.ConfigFile
	layer    []*tar.Header
	files    map[string][]byte
}

func readArchive(t *testing.T, b []byte) archive {
	t.Helper()
	var a archive
	entries := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		body, err := io.ReadAll(tr)
		require.NoError(t, err)
		a.order = append(a.order, hdr.Name)
		entries[hdr.Name] = body
		if strings.HasPrefix(hdr.Name, "blobs/sha256/") {
			sum := sha256.Sum256(body)
			require.Equal(t, strings.TrimPrefix(hdr.Name, "blobs/sha256/"), hex.EncodeToString(sum[:]), "blob %s is not content-addressed", hdr.Name)
		}
	}
	require.JSONEq(t, `{"imageLayoutVersion":"1.0.0"}`, string(entries["oci-layout"]))
	require.NoError(t, json.Unmarshal(entries["index.json"], &a.index))
	require.Len(t, a.index.Manifests, 1)
	blob := func(d v1.Descriptor) []byte {
		body, ok := entries["blobs/"+d.Digest.Algorithm+"/"+d.Digest.Hex]
		require.True(t, ok, "blob %s missing", d.Digest)
		require.EqualValues(t, d.Size, len(body), "blob %s size", d.Digest)
		return body
	}
	require.NoError(t, json.Unmarshal(blob(a.index.Manifests[0]), &a.manifest))
	require.NoError(t, json.Unmarshal(blob(a.manifest.Config), &a.config))
	require.Len(t, a.manifest.Layers, 1)
	zr, err := gzip.NewReader(bytes.NewReader(blob(a.manifest.Layers[0])))
	require.NoError(t, err)
	raw, err := io.ReadAll(zr)
	require.NoError(t, err)
	sum := sha256.Sum256(raw)
	require.Equal(t, "sha256:"+hex.EncodeToString(sum[:]), a.config.RootFS.DiffIDs[0].String(), "diff ID")
	a.files = map[string][]byte{}
	lr := tar.NewReader(bytes.NewReader(raw))
	for {
		hdr, err := lr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		body, err := io.ReadAll(lr)
		require.NoError(t, err)
		a.layer = append(a.layer, hdr)
		if hdr.Typeflag == tar.TypeReg {
			a.files["/"+hdr.Name] = body
		}
	}
	return a
}

func writeArchive(t *testing.T, ref string, spec Spec) []byte {
	t.Helper()
	img, err := Build(spec)
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, WriteArchive(&buf, ref, img))
	return buf.Bytes()
}

func TestArchiveLayout(t *testing.T) {
	src := filepath.Join(t.TempDir(), "bin")
	require.NoError(t, os.WriteFile(src, []byte("\x7fELF not really"), 0o600))
	spec := Drip(src, "v9.9.9")
	spec.Architecture = "arm64"
	a := readArchive(t, writeArchive(t, "drip:dev", spec))

	assert.Equal(t, []string{"oci-layout", "index.json"}, a.order[:2], "layout files first")
	m := a.index.Manifests[0]
	assert.Equal(t, types.OCIManifestSchema1, m.MediaType)
	assert.Equal(t, "docker.io/library/drip:dev", m.Annotations[AnnotationImageName], "the name ctr import gives the image")
	assert.Equal(t, "dev", m.Annotations[AnnotationRefName])
	assert.Equal(t, &v1.Platform{OS: "linux", Architecture: "arm64"}, m.Platform)
	assert.Equal(t, types.OCIConfigJSON, a.manifest.Config.MediaType)
	assert.Equal(t, types.OCILayer, a.manifest.Layers[0].MediaType)

	c := a.config.Config
	assert.Equal(t, []string{"/usr/local/bin/drip"}, c.Entrypoint)
	assert.Equal(t, []string{"--help"}, c.Cmd)
	assert.Equal(t, "65532:65532", c.User)
	assert.Contains(t, c.ExposedPorts, "7100/tcp")
	assert.Equal(t, "v9.9.9", c.Labels["org.opencontainers.image.version"])
	assert.Equal(t, time.Unix(0, 0).UTC(), a.config.Created.Time.UTC())

	assert.Equal(t, []byte("\x7fELF not really"), a.files["/usr/local/bin/drip"])
	assert.Contains(t, string(a.files["/etc/passwd"]), "nonroot:x:65532:65532:")
	byName := map[string]*tar.Header{}
	for _, h := range a.layer {
		byName[h.Name] = h
	}
	require.Contains(t, byName, "usr/", "parent directories are in the layer")
	assert.EqualValues(t, 0o755, byName["usr/local/bin/drip"].Mode)
	assert.EqualValues(t, 0o1777, byName["tmp/"].Mode)
	assert.Equal(t, NonRootUID, byName["home/nonroot/"].Uid)
	assert.Equal(t, 0, byName["home/"].Uid)
}

// TestLayerMatchesFiles is a property test against the simplest reference,
// the map of paths to contents: random trees come back file for file, each
// directory precedes what it holds, and equal inputs give equal bytes.
func TestLayerMatchesFiles(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	parts := []string{"a", "b", "etc", "bin", "x.y", "long-name"}
	for iter := 0; iter < 200; iter++ {
		want := map[string][]byte{}
		var spec Spec
		for n := rng.Intn(8); n >= 0; n-- {
			depth := 1 + rng.Intn(4)
			p := ""
			for i := 0; i < depth; i++ {
				p += "/" + parts[rng.Intn(len(parts))]
			}
			p += fmt.Sprintf("/f%d", n)
			data := make([]byte, rng.Intn(300))
			rng.Read(data)
			want[p] = data
			spec.Files = append(spec.Files, File{Path: p, Mode: 0o644, Data: data})
		}
		rng.Shuffle(len(spec.Files), func(i, j int) { spec.Files[i], spec.Files[j] = spec.Files[j], spec.Files[i] })
		b := writeArchive(t, "x/y:z", spec)
		a := readArchive(t, b)
		require.Equal(t, want, a.files, "iteration %d", iter)
		seen := map[string]bool{}
		for _, h := range a.layer {
			dir := filepath.Dir("/" + strings.TrimSuffix(h.Name, "/"))
			require.True(t, dir == "/" || seen[dir], "iteration %d: %s before its directory", iter, h.Name)
			seen["/"+strings.TrimSuffix(h.Name, "/")] = true
		}
		rng.Shuffle(len(spec.Files), func(i, j int) { spec.Files[i], spec.Files[j] = spec.Files[j], spec.Files[i] })
		require.Equal(t, b, writeArchive(t, "x/y:z", spec), "iteration %d: order of Files changed the archive", iter)
	}
}

func TestBuildRejects(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		err  string
	}{
		{"relative path", Spec{Files: []File{{Path: "bin/x"}}}, `"bin/x" must be absolute`},
		{"unclean path", Spec{Files: []File{{Path: "/a/../b"}}}, `"/a/../b" must be absolute, clean`},
		{"root", Spec{Dirs: []Dir{{Path: "/"}}}, `"/" must be absolute, clean and not /`},
		{"duplicate file", Spec{Files: []File{{Path: "/a"}, {Path: "/a"}}}, "/a given twice"},
		{"file under a file", Spec{Files: []File{{Path: "/a"}, {Path: "/a/b"}}}, "/a is both a file and a directory"},
		{"two sources", Spec{Files: []File{{Path: "/a", Data: []byte{1}, Source: "/etc/hostname"}}}, "both Data and Source"},
		{"missing source", Spec{Files: []File{{Path: "/a", Source: "/nonexistent/ociimage"}}}, "image file /a: open /nonexistent/ociimage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Build(tt.spec)
			require.ErrorContains(t, err, tt.err)
		})
	}
	_, err := Build(Spec{})
	require.NoError(t, err, "an empty image is valid")
	require.ErrorContains(t, WriteArchive(io.Discard, "UPPER", nil), `"UPPER"`)
}

func TestWriteArchiveFileLeavesNothingOnError(t *testing.T) {
	dir := t.TempDir()
	img, err := Build(Spec{})
	require.NoError(t, err)
	require.Error(t, WriteArchiveFile(filepath.Join(dir, "x.tar"), "Bad Ref", img))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "no partial archive")
	require.NoError(t, WriteArchiveFile(filepath.Join(dir, "x.tar"), "ok:1", img))
	fi, err := os.Stat(filepath.Join(dir, "x.tar"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm(), "readable by whoever imports it")
}

// TestPauseArchive builds the real pause program: it must come out static
// (the image has no libc), as /pause, the image's entrypoint.
func TestPauseArchive(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go command to build the pause program")
	}
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	out := filepath.Join(t.TempDir(), "pause.tar")
	require.NoError(t, PauseArchive(context.Background(), ArchiveRequest{Root: root, Ref: "drip.local/pause:1", Path: out}))
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	a := readArchive(t, b)
	assert.Equal(t, []string{"/pause"}, a.config.Config.Entrypoint)
	bin := a.files["/pause"]
	require.NotEmpty(t, bin)
	f, err := elf.NewFile(bytes.NewReader(bin))
	require.NoError(t, err)
	for _, p := range f.Progs {
		assert.NotEqual(t, elf.PT_INTERP, p.Type, "pause must be static: it has an ELF interpreter")
	}
	require.ErrorContains(t, PauseArchive(context.Background(), ArchiveRequest{Root: t.TempDir(), Ref: "p:1", Path: out}), "go build ./internal/ociimage/pause")
}

func BenchmarkBuildArchive(b *testing.B) {
	data := make([]byte, 4<<20)
	rand.New(rand.NewSource(1)).Read(data)
	spec := Spec{Files: []File{{Path: "/bin/x", Mode: 0o755, Data: data}}}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for i := 0; i < b.N; i++ {
		img, err := Build(spec)
		if err != nil {
			b.Fatal(err)
		}
		if err := WriteArchive(io.Discard, "x:1", img); err != nil {
			b.Fatal(err)
		}
	}
}
