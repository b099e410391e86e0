package authz_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/authz"
	"github.com/dripmesh/drip/internal/content"
)

// BenchmarkCheckPublish is what a restricted publisher pays per message on
// top of publishing: one exact match of a two-constraint predicate.
func BenchmarkCheckPublish(b *testing.B) {
	p, err := authz.Parse("bench.yaml", []byte(`rules: [{name: r, client: {any: true}, publish: 'tenant = "a" && price > 1', subscribe: all}]`))
	require.NoError(b, err)
	m := content.MessageFrom(map[string]content.Value{"tenant": content.String("a"), "price": content.Float(12.5), "symbol": content.String("DRIP")})
	r := &p.Rules[0]
	b.ReportAllocs()
	for i := range b.N {
		if err := r.CheckPublish(m, uint64(i)); err != nil {
			b.Fatal(err)
		}
	}
}
