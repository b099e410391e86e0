package main

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testbedOnly are import path fragments of what measures drip and must not
// ship in the broker binary or its image: plotting (gonum), the NATS client,
// the STOMP client and the rest of internal/testbed. They belong to driplab.
var testbedOnly = []string{"gonum.org/", "github.com/nats-io/", "plot", "stomp", "github.com/dripmesh/drip/internal/testbed"}

// deps lists the packages a main package of this module links, with the go
// tool, which reads import lists without compiling.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH to list dependencies with")
	}
	out, err := exec.Command(gobin, "list", "-deps", pkg).Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, ee.Stderr)
	}
	require.NoError(t, err, "go list -deps %s", pkg)
	return strings.Fields(string(out))
}

func testbedDeps(list []string) []string {
	var found []string
	for _, d := range list {
		for _, bad := range testbedOnly {
			if strings.Contains(d, bad) {
				found = append(found, d)
				break
			}
		}
	}
	return found
}

// The broker binary links no testbed package (issue 16: the image carries
// only what a broker needs). driplab's list proves the check can see them.
func TestBrokerLinksNoTestbed(t *testing.T) {
	drip := deps(t, ".")
	require.Contains(t, drip, "github.com/dripmesh/drip/internal/broker", "the list is drip's")
	assert.Empty(t, testbedDeps(drip), "go list -deps ./cmd/drip: testbed packages in the broker binary; move their users to cmd/driplab")

	lab := testbedDeps(deps(t, "../driplab"))
	for _, want := range []string{"gonum.org/v1/plot", "github.com/nats-io/nats.go", "github.com/dripmesh/drip/internal/testbed/stomp"} {
		assert.Contains(t, lab, want, "driplab links the testbed, and the check finds it")
	}
}
