package cli

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"google.golang.org/grpc/codes"

	"github.com/dripmesh/drip/internal/bench/benchtest"
	"google.golang.org/grpc/status"
)

// TestExecutePrintsOneCleanLine runs the command line as the binary does
// and checks the exit status and the exact line a user reads for bad
// input: no "drip client:" or gRPC wrapping, the subcommand named once.
func TestExecutePrintsOneCleanLine(t *testing.T) {
	m := testMesh(t, 1, benchtest.Fault{})
	b := m.Addrs()[0]
	tests := []struct {
		args  []string
		stdin string
		want  string
	}{
		{[]string{"sub", "--broker", b, "a = "}, "", "drip sub: predicate at byte 4: expected a value, found end of input"},
		{[]string{"sub", "--broker", b, ""}, "", "drip sub: predicate is empty: give at least one filter, such as a = 1"},
		{[]string{"sub", "--broker", b, `s = "\xff"`}, "", `drip sub: no message can satisfy s = "\xff": message strings are valid UTF-8 and "\xff" is not`},
		{[]string{"sub", "--broker", "127.0.0.1", "a = 1"}, "", `drip sub: broker address "127.0.0.1" has no port (want host:port, for example 127.0.0.1:7000)`},
		{[]string{"pub", "--broker", b, "--attr", "s=\xff"}, "", `drip pub: message 0: attribute "s": string value is not valid UTF-8`},
		{[]string{"pub", "--broker", b}, "{\"attrs\":{\"s\":\"\xff\"}}\n", "drip pub: standard input line 1: not valid UTF-8 at byte 15 (names, strings and payload text are UTF-8; give binary payloads in base64 under payload_b64)"},
	}
	for _, tt := range tests {
		root := NewRoot()
		var out, errOut bytes.Buffer
		root.SetIn(strings.NewReader(tt.stdin))
		root.SetOut(&out)
		root.SetErr(&errOut)
		root.SetArgs(tt.args)
		root.SetContext(testCtx(t))
		assert.Equal(t, 1, Execute(root), "%q", tt.args)
		lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
		assert.Equal(t, tt.want, lines[len(lines)-1], "%q", tt.args)
	}
}

func TestErrorText(t *testing.T) {
	st := status.Error(codes.InvalidArgument, "message 0: string value is not valid UTF-8")
	err := fmt.Errorf("drip client: broker b:1 rejected a message: %w", st)
	assert.Equal(t, "broker b:1 rejected a message: message 0: string value is not valid UTF-8", errorText(err))
	assert.Equal(t, "plain", errorText(errors.New("plain")))
}
