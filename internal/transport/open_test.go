package transport

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/encoding"
)

// The handshake contract of docs/design.md §2: a mesh runs one Bloom
// scheme. Opens filled from Params are compatible exactly when the Params
// are equal, and a broker older than the scheme field (no scheme) is a
// cat-v1 broker: compatible with cat-v1, refused by cat-v2 with reason
// "bloom" and a detail naming both schemes.
func TestOpenBloomAndCompatibility(t *testing.T) {
	open := func(id uint32, p encoding.Params) *dripv1.Open {
		o := &dripv1.Open{ProtocolVersion: ProtocolVersion, RouterId: id, RouterName: fmt.Sprint("b", id), Mesh: "m"}
		SetOpenBloom(o, p)
		return o
	}
	v1, v2 := encoding.DefaultParamsV1(), encoding.DefaultParams()
	for _, p := range []encoding.Params{v1, v2, {Scheme: encoding.SchemeCatV2, M: 1024, K: 4}} {
		got, err := OpenBloom(open(1, p))
		require.NoError(t, err)
		assert.Equal(t, p, got)
	}
	old := open(2, v1)
	old.BloomScheme = "" // a broker from before the field
	got, err := OpenBloom(old)
	require.NoError(t, err)
	assert.Equal(t, v1, got)

	for _, tc := range []struct {
		name          string
		local, remote *dripv1.Open
		detail        string
	}{
		{"cat-v1 with cat-v1", open(1, v1), open(2, v1), ""},
		{"cat-v2 with cat-v2", open(1, v2), open(2, v2), ""},
		{"cat-v1 with an older broker", open(1, v1), old, ""},
		{"cat-v2 with an older broker", open(1, v2), old, `peer "b2" encodes with cat-v1 M=512 K=6, we with cat-v2 M=2048 K=6`},
		{"an older broker with cat-v2", old, open(1, v2), `peer "b1" encodes with cat-v2 M=2048 K=6, we with cat-v1 M=512 K=6`},
		{"same M and K, other scheme", open(1, encoding.Params{Scheme: encoding.SchemeCatV2, M: 512, K: 6}), open(2, v1),
			`peer "b2" encodes with cat-v1 M=512 K=6, we with cat-v2 M=512 K=6`},
		{"a scheme from the future", open(1, v2), func() *dripv1.Open { o := open(2, v2); o.BloomScheme = "cat-v3"; return o }(),
			`peer "b2" encodes with cat-v3 M=2048 K=6, we with cat-v2 M=2048 K=6`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Compatible(tc.local, tc.remote)
			if tc.detail == "" {
				require.NoError(t, err)
				return
			}
			reason, ok := IsIncompatible(err)
			require.True(t, ok, "%v", err)
			assert.Equal(t, "bloom", reason)
			assert.ErrorContains(t, err, tc.detail)
		})
	}

	future := open(3, v2)
	future.BloomScheme = "cat-v3"
	_, err = OpenBloom(future)
	assert.EqualError(t, err, `open of router 3: unknown Bloom scheme "cat-v3", want cat-v1 or cat-v2`)
	bad := open(3, v2)
	bad.BloomScheme = "cat-v1"
	_, err = OpenBloom(bad)
	assert.ErrorContains(t, err, "open of router 3: encoding: M=2048 bits")
}
