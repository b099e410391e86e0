package e2e

import (
	"context"

	"github.com/dripmesh/drip/internal/ociimage"
)

// Where there is no Docker engine (CI here, with the cluster of
// hack/k8s-local), -load ctr packs the image in Go instead: the same static
// binary, user and entrypoint as deploy/Dockerfile.
func init() {
	withDocker := imageArchiver
	imageArchiver = func(ctx context.Context, req archiveRequest) error {
		if dockerInfo(ctx) == nil {
			return withDocker(ctx, req)
		}
		return ociimage.DripArchive(ctx, ociimage.ArchiveRequest{Root: req.Root, Ref: req.Image, Path: req.Path})
	}
}
