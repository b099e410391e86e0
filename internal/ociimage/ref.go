package ociimage

import (
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// Normalize returns the fully qualified form of an image reference, the form
// containerd stores imported images under and the kubelet asks for:
// drip:dev becomes docker.io/library/drip:dev, a reference without tag gets
// :latest, and one with a registry host (a first path component with a dot or
// a colon, or localhost) keeps it.
func Normalize(ref string) (string, error) {
	if ref == "" {
		return "", fmt.Errorf("image reference is empty")
	}
	// go-containerregistry validates the grammar; its own defaulting
	// (index.docker.io) differs from containerd's, so the rest is done here.
	if _, err := name.ParseReference(ref); err != nil {
		return "", fmt.Errorf("image reference %q: %w", ref, err)
	}
	domain, rest := "docker.io", ref
	if i := strings.IndexByte(ref, '/'); i >= 0 {
		first := ref[:i]
		if strings.ContainsAny(first, ".:") || first == "localhost" {
			domain, rest = first, ref[i+1:]
		}
	}
	if domain == "index.docker.io" {
		domain = "docker.io"
	}
	if domain == "docker.io" && !strings.Contains(rest, "/") {
		rest = "library/" + rest
	}
	// The tag separator is a colon after the last slash; a digest has '@'.
	last := rest[strings.LastIndexByte(rest, '/')+1:]
	if !strings.Contains(last, ":") && !strings.Contains(rest, "@") {
		rest += ":latest"
	}
	return domain + "/" + rest, nil
}

// tagOf returns the tag of a normalized reference, or "" for a digest one.
func tagOf(normalized string) string {
	if strings.Contains(normalized, "@") {
		return ""
	}
	last := normalized[strings.LastIndexByte(normalized, '/')+1:]
	return last[strings.LastIndexByte(last, ':')+1:]
}
