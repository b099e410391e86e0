package cli

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Settings are checked before anything starts, and report needs the JSON
// of a run. (The harness itself runs in internal/testbed/perf's smoke
// test.)
func TestPerfErrors(t *testing.T) {
	dir := t.TempDir()
	_, _, err := execute(testCtx(t), "", "perf", "--cases", "one-to-one,nope", "--drip-binary", "/bin/true", "--out", dir, "-q")
	assert.ErrorContains(t, err, `unknown case "nope"`)
	_, _, err = execute(testCtx(t), "", "perf", "--reps", "0", "--drip-binary", "/bin/true", "--out", dir, "-q")
	assert.ErrorContains(t, err, "repetitions 0")
	_, _, err = execute(testCtx(t), "", "perf", "report", "--out", dir)
	assert.ErrorContains(t, err, filepath.Join(dir, "perf-summary.json"))
	_, _, err = execute(testCtx(t), "", "perf", "subscribers", "--system", "nats", "--addr", "x:1", "--predicates", filepath.Join(dir, "none"))
	assert.ErrorContains(t, err, "--predicates")
}
