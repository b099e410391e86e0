package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// drip version prints to standard output, so that `drip version | cat`
// shows it. The root has no SetOut here: a command writing with
// cmd.Println would reach the process's stderr, and the pipe would stay
// empty.
func TestVersion(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	stdout := os.Stdout
	os.Stdout = w
	defer func() { os.Stdout = stdout }()

	root := NewRoot()
	var errOut bytes.Buffer
	root.SetErr(&errOut)
	root.SetArgs([]string{"version"})
	err = root.Execute()
	os.Stdout = stdout
	require.NoError(t, w.Close())
	require.NoError(t, err)
	out, err := io.ReadAll(r)
	require.NoError(t, err)
	assert.Regexp(t, `^drip \S+ \(go\S+ \w+/\w+\)\n$`, string(out))
	assert.Empty(t, errOut.String())
}

// The drip binary carries the broker and what ships with it; the lab and
// the experiments are driplab's (internal/testbed/cli).
func TestRootCommands(t *testing.T) {
	var names []string
	for _, c := range NewRoot().Commands() {
		if !c.Hidden {
			names = append(names, c.Name())
		}
	}
	assert.ElementsMatch(t, []string{"version", "broker", "local", "pub", "sub", "bench", "netem", "selftest"}, names)
}

// Someone following older instructions learns where the testbed went.
func TestTestbedCommandsMoved(t *testing.T) {
	for _, args := range [][]string{{"lab", "up", "square.yaml"}, {"experiment", "run", "--lab", "--scenario", "smoke"}} {
		_, _, err := execute(context.Background(), "", args...)
		require.Error(t, err)
		assert.Equal(t, args[0]+" is a driplab command: run driplab "+args[0]+" (make build writes bin/driplab beside bin/drip)", err.Error())
	}
}

func TestPlural(t *testing.T) {
	assert.Equal(t, "0 hops", Plural(0, "hop", "hops"))
	assert.Equal(t, "1 hop", Plural(1, "hop", "hops"))
	assert.Equal(t, "2 deliveries", Plural(2, "delivery", "deliveries"))
	assert.Equal(t, "-1 message", Plural(-1, "message", "messages"))
}
