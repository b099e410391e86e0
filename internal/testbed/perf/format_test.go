package perf

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFormat(t *testing.T) {
	assert.Equal(t, "1,684,911", group(1684911.4))
	assert.Equal(t, "999", group(999))
	assert.Equal(t, "1,000", group(999.6))
	assert.Equal(t, "-12,345", group(-12345))
	assert.Equal(t, "0", group(0))
	assert.Equal(t, "–", group(math.NaN()))
	assert.Equal(t, "27.00%", percent(0.27))
	assert.Equal(t, "0.0591", ratio(0.05912))
	assert.Equal(t, "12", ratio(12))
	assert.Equal(t, "1234", ratio(1234.4))
	assert.Equal(t, "–", ratio(Num(math.Inf(1))))
	assert.Equal(t, "5.60", value(5.6, "us"))
	assert.Equal(t, "0.125", value(0.125, "ms"))
}
