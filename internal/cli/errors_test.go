package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
		{[]string{"sub", "--broker", b, "-"}, "a = 1 ||\n", "drip sub: predicate at byte 9: expected an attribute name, found end of input"},
		{[]string{"sub", "--broker", b, "--file", "-", "a = 1"}, "", "drip sub: give the predicate as an argument or with --file, not both"},
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

func TestReadPredicate(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "p.txt")
	require.NoError(t, os.WriteFile(good, []byte("a = 1\n|| b exists\n"), 0o600))
	big := filepath.Join(dir, "big.txt")
	require.NoError(t, os.WriteFile(big, bytes.Repeat([]byte("a"), 1<<20+1), 0o600))
	tests := []struct {
		file, stdin string
		args        []string
		want, err   string
	}{
		{args: []string{"a = 1"}, want: "a = 1"},
		{args: []string{"-"}, stdin: "x exists", want: "x exists"},
		{file: "-", stdin: "x exists", want: "x exists"},
		{file: good, want: "a = 1\n|| b exists\n"},
		{file: filepath.Join(dir, "none"), err: "--file: open " + filepath.Join(dir, "none") + ": no such file or directory"},
		{file: big, err: "the predicate in " + big + " is over 1048576 bytes, the broker's limit on a predicate's text"},
	}
	for _, tt := range tests {
		got, err := readPredicate(strings.NewReader(tt.stdin), tt.file, tt.args)
		if tt.err != "" {
			assert.EqualError(t, err, tt.err)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, tt.want, got)
	}
}
