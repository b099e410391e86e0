package authz

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// MaxTokenBytes bounds a bearer token; a longer one is refused before it
// is hashed.
const MaxTokenBytes = 4096

// FromContext is the identity of the client of a gRPC server stream: the
// names of its certificate if the TLS handshake verified one (the listener
// requires client certificates), and the hash of the bearer token in its
// "authorization" metadata. A malformed authorization header is an error
// (Unauthenticated at the broker): a client that meant to present a token
// must not be treated as anonymous.
func FromContext(ctx context.Context) (Identity, error) {
	var id Identity
	if p, ok := peer.FromContext(ctx); ok {
		if info, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(info.State.VerifiedChains) > 0 && len(info.State.PeerCertificates) > 0 {
			leaf := info.State.PeerCertificates[0]
			id.CommonName = leaf.Subject.CommonName
			id.DNSNames = leaf.DNSNames
			for _, u := range leaf.URIs {
				id.URIs = append(id.URIs, u.String())
			}
		}
	}
	md, _ := metadata.FromIncomingContext(ctx)
	auth := md.Get("authorization")
	switch {
	case len(auth) == 0:
		return id, nil
	case len(auth) > 1:
		return id, fmt.Errorf("%d authorization headers; send one", len(auth))
	case len(auth[0]) > MaxTokenBytes+len("Bearer "):
		return id, fmt.Errorf("authorization header is %d bytes, over the limit of %d", len(auth[0]), MaxTokenBytes+len("Bearer "))
	}
	scheme, token, ok := strings.Cut(auth[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return id, fmt.Errorf("authorization header is not \"Bearer <token>\"")
	}
	id.TokenSHA256 = TokenHash(strings.TrimSpace(token))
	return id, nil
}
