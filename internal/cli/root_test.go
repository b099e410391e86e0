package cli

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestVersion(t *testing.T) {
	out, _, err := execute(context.Background(), "", "version")
	require.NoError(t, err)
	assert.Regexp(t, `^drip \S+ \(go\S+ \w+/\w+\)`, out)
}
