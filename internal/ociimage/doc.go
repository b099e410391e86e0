// Package ociimage packs static binaries into single-layer OCI images and
// writes them as OCI image-layout tarballs that `ctr -n k8s.io images import`
// loads into containerd, so that a Kubernetes node without Docker and without
// a registry can run drip (and the pause and CoreDNS images of hack/k8s-local)
// with imagePullPolicy Never.
//
// An image is described by a [Spec]: the files of its one layer and the
// runtime config (entrypoint, user, environment, ports). [Build] turns a Spec
// into a go-containerregistry v1.Image and [WriteArchive] writes that image as
// a tarball: oci-layout, index.json and the blobs. The index entry carries the
// image's full name in the io.containerd.image.name annotation, which is the
// name containerd gives the imported image, and the kubelet looks images up
// by the same normalized name (drip:dev is docker.io/library/drip:dev).
//
// Builds are reproducible: entries are sorted, owned by root and dated at the
// Unix epoch unless a Spec says otherwise, so the same binaries always give
// the same image digest and a re-import is a no-op.
//
// [Drip], [Pause] and [CoreDNS] are the Specs of the images the project
// needs; [BuildGo] compiles a static binary to put in one. cmd/ociimage is the
// command-line front end, and test/e2e packs the drip image through
// [DripArchive].
//
// This package is build tooling, not part of the broker: it has nothing to do
// with the B-DRP protocol of Carzaniga09 and shells out to `go build`.
package ociimage
