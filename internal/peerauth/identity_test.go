package peerauth

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestNamesRouter: a certificate names a router by the URI SAN
// or the DNS SAN form, exactly — not another router, mesh or a prefix.
func TestNamesRouter(t *testing.T) {
	uri := func(s string) *url.URL {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	for _, tc := range []struct {
		name string
		cert x509.Certificate
		want bool
	}{
		{"uri", x509.Certificate{URIs: []*url.URL{uri("drip://m/router/7")}}, true},
		{"dns", x509.Certificate{DNSNames: []string{"b7.example", "7.router.m.drip.internal"}}, true},
		{"dns in another case", x509.Certificate{DNSNames: []string{"7.Router.M.drip.internal"}}, true},
		{"none", x509.Certificate{DNSNames: []string{"b7.example"}}, false},
		{"uri of another router", x509.Certificate{URIs: []*url.URL{uri("drip://m/router/70")}}, false},
		{"uri of another mesh", x509.Certificate{URIs: []*url.URL{uri("drip://n/router/7")}}, false},
		{"dns of another router", x509.Certificate{DNSNames: []string{"17.router.m.drip.internal"}}, false},
		{"dns of another mesh", x509.Certificate{DNSNames: []string{"7.router.mm.drip.internal"}}, false},
		{"dns wildcard", x509.Certificate{DNSNames: []string{"*.router.m.drip.internal"}}, false},
		{"common name only", x509.Certificate{Subject: pkix.Name{CommonName: "drip://m/router/7"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, NamesRouter(&tc.cert, "m", 7))
		})
	}
	assert.Equal(t, "drip://m/router/7", IdentityURI("m", 7))
	assert.Equal(t, "7.router.m.drip.internal", IdentityDNS("m", 7))
}
