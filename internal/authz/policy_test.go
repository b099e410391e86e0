package authz_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/dripmesh/drip/internal/authz"
	"github.com/dripmesh/drip/internal/content"
)

const hashA = "3767e6cdb6757a6683fc1e8b9d513fef132a01346372c19b8077ba6d9c1321c6" // TokenHash("tenant-b-secret")

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, policy, want string
	}{
		{"empty file", ``, `authorization policy p.yaml: the file is empty`},
		{"no rules", `rules: []`, `no rules`},
		{"unknown top-level field", "rule:\n  - name: a\n", `field rule not found`},
		{"unknown rule field", "rules:\n  - name: a\n    client: {any: true}\n    publish: all\n    subscribe: all\n    publsh: none\n", `line 6: field publsh not found`},
		{"unknown selector field", "rules:\n  - name: a\n    client: {cn: x}\n    publish: all\n    subscribe: all\n", `field cn not found`},
		{"rule without name", "rules:\n  - client: {any: true}\n    publish: all\n    subscribe: all\n", `rule 1 (line 2): field name: missing`},
		{"duplicate name", "rules:\n  - {name: a, client: {any: true}, publish: all, subscribe: all}\n  - {name: a, client: {any: true}, publish: all, subscribe: all}\n",
			`rule "a" (line 3): field name: also the name of the rule on line 2`},
		{"no client", "rules:\n  - {name: a, publish: all, subscribe: all}\n", `rule "a" (line 2): field client: missing`},
		{"empty client", "rules:\n  - {name: a, client: {}, publish: all, subscribe: all}\n", `field client: gives 0 of`},
		{"two selectors", "rules:\n  - {name: a, client: {common_name: x, any: true}, publish: all, subscribe: all}\n", `field client: gives 2 of`},
		{"plaintext token", "rules:\n  - {name: a, client: {token_sha256: hunter2}, publish: all, subscribe: all}\n", `field client.token_sha256: want the 64 hex digits`},
		{"short hash", "rules:\n  - {name: a, client: {token_sha256: " + hashA[:62] + "}, publish: all, subscribe: all}\n", `field client.token_sha256`},
		{"missing publish", "rules:\n  - {name: a, client: {any: true}, subscribe: all}\n", `rule "a" (line 2): field publish: missing; write a predicate, "all" or "none"`},
		{"missing subscribe", "rules:\n  - {name: a, client: {any: true}, publish: all}\n", `field subscribe: missing`},
		{"bad publish predicate", "rules:\n  - {name: a, client: {any: true}, publish: 'tenant = ', subscribe: all}\n", `rule "a" (line 2): field publish: predicate: at byte 9`},
		{"bad subscribe predicate", "rules:\n  - {name: a, client: {any: true}, publish: all, subscribe: 'true'}\n", `field subscribe: predicate`},
		{"not a list", "rules: {name: a}\n", `cannot unmarshal`},
		{"too large", "# " + strings.Repeat("x", authz.MaxFileBytes), `bytes, over the limit of 4194304`},
		{"boolean side", "rules:\n  - {name: a, client: {any: true}, publish: true, subscribe: all}\n", `field publish`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := authz.Parse("p.yaml", []byte(tc.policy))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.True(t, strings.HasPrefix(err.Error(), "authorization policy p.yaml: "), err.Error())
		})
	}
}

func TestParseSides(t *testing.T) {
	p, err := authz.Parse("p.yaml", []byte(`
rules:
  - name: all-none
    client: {common_name: a}
    publish: " all "
    subscribe: none
  - name: pred
    client: {token_sha256: `+strings.ToUpper(hashA)+`}
    publish: 'tenant = "b"'
    subscribe: 'tenant = "b" || scope = "public"'
`))
	require.NoError(t, err)
	require.Len(t, p.Rules, 2)
	r0, r1 := p.Rules[0], p.Rules[1]
	assert.Equal(t, 3, r0.Line)
	assert.True(t, r0.Publish.IsAll())
	assert.True(t, r0.Subscribe.IsNone())
	assert.Equal(t, hashA, r1.Client.TokenSHA256, "hashes are kept in lowercase")
	assert.Equal(t, `tenant = "b"`, r1.Publish.String())
	assert.Equal(t, `tenant = "b" || scope = "public"`, r1.Subscribe.String())
}

// TestExamplePolicy parses the example the docs point to, so it cannot rot,
// and checks that it decides as its comments say.
func TestExamplePolicy(t *testing.T) {
	p, err := authz.Load("../../deploy/authz-policy.example.yaml")
	require.NoError(t, err)
	names := func(id authz.Identity) string {
		r, err := p.Match(id)
		require.NoError(t, err)
		return r.Name
	}
	assert.Equal(t, "tenant-a", names(authz.Identity{CommonName: "tenant-a.clients.example"}))
	assert.Equal(t, "tenant-b", names(authz.Identity{TokenSHA256: authz.TokenHash("tenant-b-secret")}))
	assert.Equal(t, "auditor", names(authz.Identity{URIs: []string{"spiffe://example.org/ns/ops/sa/auditor"}}))
	assert.Equal(t, "public", names(authz.Identity{}))
	assert.Equal(t, "public", names(authz.Identity{TokenSHA256: authz.TokenHash("wrong")}))
}

func TestMatchFirstRuleAndNoRule(t *testing.T) {
	p, err := authz.Parse("p.yaml", []byte(`
rules:
  - {name: by-cn, client: {common_name: alice}, publish: all, subscribe: all}
  - {name: by-uri, client: {uri: "spiffe://x/alice"}, publish: all, subscribe: all}
  - {name: by-dns, client: {dns: alice.example}, publish: all, subscribe: all}
  - {name: by-token, client: {token_sha256: `+hashA+`}, publish: all, subscribe: all}
`))
	require.NoError(t, err)
	for _, tc := range []struct {
		id   authz.Identity
		want string
	}{
		{authz.Identity{CommonName: "alice", URIs: []string{"spiffe://x/alice"}}, "by-cn"},
		{authz.Identity{CommonName: "bob", URIs: []string{"spiffe://x/bob", "spiffe://x/alice"}}, "by-uri"},
		{authz.Identity{DNSNames: []string{"Alice.Example"}}, "by-dns"},
		{authz.Identity{CommonName: "bob", TokenSHA256: hashA}, "by-token"},
		{authz.Identity{CommonName: "bob"}, ""},
		{authz.Identity{}, ""},
		{authz.Identity{CommonName: "Alice"}, ""},
	} {
		r, err := p.Match(tc.id)
		if tc.want == "" {
			var d *authz.DeniedError
			require.ErrorAs(t, err, &d, "%v", tc.id)
			assert.Contains(t, err.Error(), "no authorization rule matches")
			continue
		}
		require.NoError(t, err, "%v", tc.id)
		assert.Equal(t, tc.want, r.Name, "%v", tc.id)
	}
}

func TestCheckPublish(t *testing.T) {
	p, err := authz.Parse("p.yaml", []byte(`
rules:
  - {name: t, client: {any: true}, publish: 'tenant = "a"', subscribe: none}
  - {name: n, client: {any: true}, publish: none, subscribe: none}
`))
	require.NoError(t, err)
	in := content.MessageFrom(map[string]content.Value{"tenant": content.String("a")})
	out := content.MessageFrom(map[string]content.Value{"tenant": content.String("b")})
	assert.NoError(t, p.Rules[0].CheckPublish(in, 0))
	err = p.Rules[0].CheckPublish(out, 7)
	assert.EqualError(t, err, `message 7 is outside what authorization rule "t" allows to publish (tenant = "a"); nothing of its request was published`)
	assert.EqualError(t, p.Rules[1].CheckPublish(in, 0), `authorization rule "n" allows no publishing`)
}

func TestConjoin(t *testing.T) {
	p, err := authz.Parse("p.yaml", []byte(`
rules:
  - {name: t, client: {any: true}, publish: none, subscribe: 'tenant = "a" || scope = "public"'}
  - {name: all, client: {any: true}, publish: none, subscribe: all}
  - {name: none, client: {any: true}, publish: none, subscribe: none}
`))
	require.NoError(t, err)
	sub := content.MustParse(`k > 1 && tenant = "a" || z exists`)
	lim := content.DefaultLimits()
	got, err := p.Rules[0].Conjoin(sub, lim)
	require.NoError(t, err)
	assert.Equal(t, `k > 1 && tenant = "a" || k > 1 && tenant = "a" && scope = "public" || z exists && tenant = "a" || z exists && scope = "public"`, got.String(),
		"a constraint both sides share is kept once")
	got, err = p.Rules[1].Conjoin(sub, lim)
	require.NoError(t, err)
	assert.Equal(t, sub, got)
	_, err = p.Rules[2].Conjoin(sub, lim)
	assert.EqualError(t, err, `authorization rule "none" allows no subscriptions`)

	lim.MaxFilters = 3
	_, err = p.Rules[0].Conjoin(sub, lim)
	var le *authz.LimitError
	require.ErrorAs(t, err, &le)
	assert.Contains(t, err.Error(), `the predicate's 2 filters joined with the 2 of authorization rule "t" make 4, over the limit of 3 filters`)
	lim = content.DefaultLimits()
	lim.MaxConstraints = 2
	_, err = p.Rules[0].Conjoin(sub, lim)
	require.ErrorAs(t, err, &le)
	assert.Contains(t, err.Error(), `has 3 constraints, over the limit of 2`)
	assert.ErrorContains(t, p.CheckLimits(content.Limits{MaxFilters: 1}), `rule "t" (line 3): field subscribe: 2 filters, over the broker's limit of 1`)
	assert.NoError(t, p.CheckLimits(content.DefaultLimits()))
}

// refMessage and refPredicate are a reference model of a small corner of
// the predicate language (integer attributes a, b, c; =, !=, <, >, exists)
// evaluated without the content package.
type refMessage map[string]int64

type refConstraint struct {
	name  string
	op    string
	value int64
}

func (c refConstraint) text() string {
	if c.op == "exists" {
		return c.name + " exists"
	}
	return c.name + " " + c.op + " " + strconvI(c.value)
}

func strconvI(v int64) string { return string(rune('0' + v)) }

func (c refConstraint) holds(m refMessage) bool {
	v, ok := m[c.name]
	if !ok {
		return false
	}
	switch c.op {
	case "=":
		return v == c.value
	case "!=":
		return v != c.value
	case "<":
		return v < c.value
	case ">":
		return v > c.value
	}
	return true // exists
}

type refPredicate [][]refConstraint

func (p refPredicate) holds(m refMessage) bool {
	for _, f := range p {
		all := true
		for _, c := range f {
			all = all && c.holds(m)
		}
		if all {
			return true
		}
	}
	return false
}

func (p refPredicate) text() string {
	var fs []string
	for _, f := range p {
		var cs []string
		for _, c := range f {
			cs = append(cs, c.text())
		}
		fs = append(fs, strings.Join(cs, " && "))
	}
	return strings.Join(fs, " || ")
}

func randomPredicate(r *rand.Rand) refPredicate {
	ops := []string{"=", "!=", "<", ">", "exists"}
	p := make(refPredicate, 1+r.IntN(3))
	for i := range p {
		p[i] = make([]refConstraint, 1+r.IntN(3))
		for j := range p[i] {
			p[i][j] = refConstraint{name: string(rune('a' + r.IntN(3))), op: ops[r.IntN(len(ops))], value: r.Int64N(4)}
		}
	}
	return p
}

// TestConjoinNeverWidens is the property the subscribe side exists for: on
// random predicates and messages, the conjunction a broker installs matches
// a message exactly when the reference says both the subscriber's predicate
// and the rule's hold — never a message outside the rule.
func TestConjoinNeverWidens(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 45))
	for i := range 500 {
		sub, rule := randomPredicate(r), randomPredicate(r)
		policy, err := authz.Parse("p.yaml", []byte("rules:\n  - {name: r, client: {any: true}, publish: none, subscribe: '"+rule.text()+"'}\n"))
		require.NoError(t, err, rule.text())
		conj, err := policy.Rules[0].Conjoin(content.MustParse(sub.text()), content.DefaultLimits())
		require.NoError(t, err)
		for range 50 {
			m := refMessage{}
			attrs := map[string]content.Value{}
			for _, name := range []string{"a", "b", "c"} {
				if r.IntN(4) > 0 {
					v := r.Int64N(4)
					m[name], attrs[name] = v, content.Int(v)
				}
			}
			want := sub.holds(m) && rule.holds(m)
			require.Equal(t, want, conj.Matches(content.MessageFrom(attrs)),
				"case %d: subscription %q, rule %q, conjunction %q, message %v", i, sub.text(), rule.text(), conj, m)
		}
	}
}

// FuzzParse: on any bytes the parser returns a policy or an error naming
// the file, never panics, and what it accepts is well formed.
func FuzzParse(f *testing.F) {
	f.Add([]byte("rules:\n  - {name: a, client: {any: true}, publish: all, subscribe: none}\n"))
	f.Add([]byte("rules:\n  - {name: a, client: {common_name: x}, publish: 'a = 1 && b prefix \"x\"', subscribe: 'c exists'}\n"))
	f.Add([]byte("rules:\n  - {name: a, client: {token_sha256: " + hashA + "}, publish: all, subscribe: all}\n"))
	f.Add([]byte("rules:\n  - name: a\n    client:\n      uri: spiffe://x\n    publish: none\n    subscribe: 'x = \"\\xff\"'\n"))
	f.Add([]byte("rules: [{name: a}, {name: a}]"))
	f.Add([]byte("rules: &a [*a]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := authz.Parse("f.yaml", data)
		if err != nil {
			require.True(t, strings.HasPrefix(err.Error(), "authorization policy f.yaml: "), err.Error())
			return
		}
		require.NotEmpty(t, p.Rules)
		seen := map[string]bool{}
		for _, r := range p.Rules {
			require.NotEmpty(t, r.Name)
			require.False(t, seen[r.Name])
			seen[r.Name] = true
			for _, s := range []authz.Side{r.Publish, r.Subscribe} {
				if !s.IsAll() && !s.IsNone() {
					require.NoError(t, s.Predicate().Validate())
				}
			}
		}
	})
}

func TestFromContext(t *testing.T) {
	u, _ := url.Parse("spiffe://x/alice")
	leaf := &x509.Certificate{Subject: pkix.Name{CommonName: "alice"}, URIs: []*url.URL{u}, DNSNames: []string{"alice.example"}}
	verified := credentials.TLSInfo{State: tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}, VerifiedChains: [][]*x509.Certificate{{leaf}}}}
	unverified := credentials.TLSInfo{State: tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}}}
	ctx := func(info credentials.AuthInfo, auth ...string) context.Context {
		c := peer.NewContext(context.Background(), &peer.Peer{AuthInfo: info})
		md := metadata.MD{}
		for _, a := range auth {
			md.Append("authorization", a)
		}
		return metadata.NewIncomingContext(c, md)
	}
	id, err := authz.FromContext(ctx(verified))
	require.NoError(t, err)
	assert.Equal(t, authz.Identity{CommonName: "alice", URIs: []string{"spiffe://x/alice"}, DNSNames: []string{"alice.example"}}, id)

	id, err = authz.FromContext(ctx(unverified, "Bearer tenant-b-secret"))
	require.NoError(t, err)
	assert.Equal(t, authz.Identity{TokenSHA256: hashA}, id, "an unverified certificate names nobody")
	assert.Equal(t, "token sha256:3767e6cdb675…", id.String(), "the log shows a prefix of the hash, never the token")

	for _, bad := range [][]string{{"Basic dXNlcg=="}, {"Bearer "}, {"Bearer"}, {"Bearer a", "Bearer b"}, {"Bearer " + strings.Repeat("x", authz.MaxTokenBytes+1)}} {
		_, err := authz.FromContext(ctx(verified, bad...))
		assert.Error(t, err, "%q", bad)
	}
	assert.Equal(t, "DNS=a.example", authz.Identity{DNSNames: []string{"a.example", "b.example"}}.String())
	assert.Equal(t, "CN=alice, URI=spiffe://x/alice", authz.Identity{CommonName: "alice", URIs: []string{"spiffe://x/alice"}, DNSNames: []string{"a.example"}}.String())
	id, err = authz.FromContext(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "anonymous client (no verified certificate, no token)", id.String())
}
