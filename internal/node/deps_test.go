package node

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestImportsNoRPC: the node imports neither gRPC nor the generated
// protocol code, not even through another package: it is the protocol's
// logic, and the RPC layer is its drivers' (broker, transport). go list
// reads the import lists without compiling.
func TestImportsNoRPC(t *testing.T) {
	gobin, err := exec.LookPath("go")
	require.NoError(t, err, "the go tool lists the dependencies")
	out, err := exec.Command(gobin, "list", "-deps", ".").Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		t.Fatalf("go list -deps: %v\n%s", err, ee.Stderr)
	}
	require.NoError(t, err)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/dripmesh/drip/internal/linkstate", "the list holds the node's dependencies")
	for _, d := range deps {
		assert.False(t, strings.HasPrefix(d, "google.golang.org/grpc"), "the node depends on %s", d)
		assert.False(t, strings.HasPrefix(d, "github.com/dripmesh/drip/api/"), "the node depends on %s", d)
		assert.NotEqual(t, "github.com/dripmesh/drip/internal/transport", d, "the node depends on the transport")
	}
}
