package authz

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/dripmesh/drip/internal/content"
)

// All and None are the words a policy writes for a side that allows every
// message and one that allows none. Neither parses as a predicate (a
// constraint needs an operator), so they cannot be confused with one.
const (
	All  = "all"
	None = "none"
)

// MaxFileBytes bounds a policy file, so that a mistaken path (a log, a
// disk image) fails at once instead of filling the broker's memory.
const MaxFileBytes = 4 << 20

// MaxRules bounds the rules of one policy: a client's identity is checked
// against them in order at every stream it opens.
const MaxRules = 10000

// Policy is a parsed, validated policy file. It is immutable: a reload
// builds a new one.
type Policy struct {
	// File is where the policy came from, for errors and logs.
	File  string
	Rules []Rule
}

// Rule is one entry of a policy.
type Rule struct {
	Name string
	// Line is the rule's line in the policy file.
	Line      int
	Client    Selector
	Publish   Side
	Subscribe Side
}

// Selector says which clients a rule applies to. Exactly one field is set.
type Selector struct {
	CommonName string // the certificate subject's common name
	URI        string // a URI SAN of the certificate (a SPIFFE ID, say)
	DNS        string // a DNS SAN of the certificate
	// TokenSHA256 is the lowercase hex SHA-256 of a bearer token: the
	// policy never holds a token itself.
	TokenSHA256 string
	Any         bool // every client, with or without an identity
}

// Side is one direction of a rule: everything, nothing, or a predicate.
type Side struct {
	all, none bool
	pred      content.Predicate
}

// AllSide and NoneSide are the sides "all" and "none".
func AllSide() Side  { return Side{all: true} }
func NoneSide() Side { return Side{none: true} }

// PredicateSide restricts a side to p, which must be valid and non-empty.
func PredicateSide(p content.Predicate) Side { return Side{pred: p} }

// IsAll reports whether the side allows every message.
func (s Side) IsAll() bool { return s.all }

// IsNone reports whether the side allows nothing.
func (s Side) IsNone() bool { return s.none }

// Predicate is the side's predicate, nil for all and none.
func (s Side) Predicate() content.Predicate { return s.pred }

// Allows reports whether a message is inside the side.
func (s Side) Allows(m content.Message) bool {
	switch {
	case s.all:
		return true
	case s.none:
		return false
	}
	return s.pred.Matches(m)
}

func (s Side) String() string {
	switch {
	case s.all:
		return All
	case s.none:
		return None
	}
	return s.pred.String()
}

// rawRule is a rule as the file spells it.
type rawRule struct {
	Name      string       `yaml:"name"`
	Client    *rawSelector `yaml:"client"`
	Publish   *string      `yaml:"publish"`
	Subscribe *string      `yaml:"subscribe"`
}

type rawSelector struct {
	CommonName  string `yaml:"common_name"`
	URI         string `yaml:"uri"`
	DNS         string `yaml:"dns"`
	TokenSHA256 string `yaml:"token_sha256"`
	Any         bool   `yaml:"any"`
}

// Load reads and parses a policy file.
func Load(file string) (*Policy, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("authorization policy: %w", err)
	}
	defer f.Close()
	// One byte more than the limit, so that Parse sees a file over it.
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("authorization policy: %w", err)
	}
	return Parse(file, data)
}

// Parse parses a policy; file names it in errors. Unknown fields are
// errors (a misspelt field must not silently widen a rule), and so are
// duplicate rule names, a rule without a selector or without either side.
func Parse(file string, data []byte) (*Policy, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("authorization policy %s: %s", file, fmt.Sprintf(format, args...))
	}
	if len(data) > MaxFileBytes {
		return nil, fail("%d bytes, over the limit of %d", len(data), MaxFileBytes)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var raw struct {
		Rules []rawRule `yaml:"rules"`
	}
	if err := dec.Decode(&raw); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fail("the file is empty: want a list of rules under \"rules\"")
		}
		return nil, fail("%v", err)
	}
	// The rules again as nodes, for their line numbers.
	var nodes struct {
		Rules []yaml.Node `yaml:"rules"`
	}
	if err := yaml.Unmarshal(data, &nodes); err != nil || len(nodes.Rules) != len(raw.Rules) {
		return nil, fail("the rules did not decode twice alike: %v", err)
	}
	if len(raw.Rules) == 0 {
		return nil, fail("no rules: want a list of rules under \"rules\" (a policy without rules would refuse every client)")
	}
	if len(raw.Rules) > MaxRules {
		return nil, fail("%d rules, over the limit of %d", len(raw.Rules), MaxRules)
	}
	p := &Policy{File: file, Rules: make([]Rule, 0, len(raw.Rules))}
	names := make(map[string]int, len(raw.Rules))
	for i, rr := range raw.Rules {
		line := nodes.Rules[i].Line
		where := fmt.Sprintf("rule %d (line %d)", i+1, line)
		if rr.Name == "" {
			return nil, fail("%s: field name: missing; every rule is named, and denials name it", where)
		}
		where = fmt.Sprintf("rule %q (line %d)", rr.Name, line)
		if prev, ok := names[rr.Name]; ok {
			return nil, fail("%s: field name: also the name of the rule on line %d", where, prev)
		}
		names[rr.Name] = line
		r, err := buildRule(rr)
		if err != nil {
			return nil, fail("%s: %v", where, err)
		}
		r.Line = line
		p.Rules = append(p.Rules, r)
	}
	return p, nil
}

func buildRule(rr rawRule) (Rule, error) {
	r := Rule{Name: rr.Name}
	if rr.Client == nil {
		return r, errors.New("field client: missing; give one of common_name, uri, dns, token_sha256 or any: true")
	}
	s := rr.Client
	set := 0
	for _, v := range []bool{s.CommonName != "", s.URI != "", s.DNS != "", s.TokenSHA256 != "", s.Any} {
		if v {
			set++
		}
	}
	if set != 1 {
		return r, fmt.Errorf("field client: gives %d of common_name, uri, dns, token_sha256 and any: true; want exactly one", set)
	}
	if s.TokenSHA256 != "" {
		h := strings.ToLower(s.TokenSHA256)
		if b, err := hex.DecodeString(h); err != nil || len(b) != sha256.Size {
			return r, errors.New("field client.token_sha256: want the 64 hex digits of the token's SHA-256 (sha256sum), never the token itself")
		}
		s.TokenSHA256 = h
	}
	r.Client = Selector{CommonName: s.CommonName, URI: s.URI, DNS: s.DNS, TokenSHA256: s.TokenSHA256, Any: s.Any}
	var err error
	if r.Publish, err = parseSide("publish", rr.Publish); err != nil {
		return r, err
	}
	if r.Subscribe, err = parseSide("subscribe", rr.Subscribe); err != nil {
		return r, err
	}
	return r, nil
}

// parseSide parses one side. It must be given: a rule that forgot a side
// is more likely a mistake than a wish to deny it.
func parseSide(field string, text *string) (Side, error) {
	if text == nil {
		return Side{}, fmt.Errorf("field %s: missing; write a predicate, %q or %q", field, All, None)
	}
	switch strings.TrimSpace(*text) {
	case All:
		return AllSide(), nil
	case None:
		return NoneSide(), nil
	}
	pred, err := content.Parse(*text)
	if err == nil {
		err = content.CheckMatchable(pred)
	}
	if err != nil {
		return Side{}, fmt.Errorf("field %s: %v (write a predicate, %q or %q)", field, err, All, None)
	}
	return PredicateSide(pred), nil
}

// TokenHash is the hex SHA-256 of a bearer token, as policies store it.
func TokenHash(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// Identity is what a broker knows of a client: its verified certificate's
// names and the hash of the token it presented. The zero Identity is an
// anonymous client.
type Identity struct {
	CommonName  string
	URIs        []string
	DNSNames    []string
	TokenSHA256 string // "" when the client presented no token
}

// String names the identity in logs and errors without revealing a token
// (its hash's first 12 digits identify it to whoever holds the policy).
func (id Identity) String() string {
	var parts []string
	if id.CommonName != "" {
		parts = append(parts, "CN="+id.CommonName)
	}
	for _, u := range id.URIs {
		parts = append(parts, "URI="+u)
	}
	if id.CommonName == "" && len(id.URIs) == 0 && len(id.DNSNames) > 0 {
		// A certificate named only by DNS SANs (often many): the first.
		parts = append(parts, "DNS="+id.DNSNames[0])
	}
	if id.TokenSHA256 != "" {
		parts = append(parts, "token sha256:"+id.TokenSHA256[:min(12, len(id.TokenSHA256))]+"…")
	}
	if len(parts) == 0 {
		return "anonymous client (no verified certificate, no token)"
	}
	return strings.Join(parts, ", ")
}

// Matches reports whether the selector applies to id.
func (s Selector) Matches(id Identity) bool {
	switch {
	case s.Any:
		return true
	case s.CommonName != "":
		return id.CommonName == s.CommonName
	case s.URI != "":
		for _, u := range id.URIs {
			if u == s.URI {
				return true
			}
		}
	case s.DNS != "":
		for _, d := range id.DNSNames {
			if strings.EqualFold(d, s.DNS) {
				return true
			}
		}
	case s.TokenSHA256 != "":
		return id.TokenSHA256 != "" && subtle.ConstantTimeCompare([]byte(id.TokenSHA256), []byte(s.TokenSHA256)) == 1
	}
	return false
}

// DeniedError is an authorization refusal. Its message names the rule (or
// that none matched); the broker returns it as PermissionDenied.
type DeniedError struct {
	Rule string // "" when no rule matched
	Msg  string
}

func (e *DeniedError) Error() string { return e.Msg }

// Match returns the first rule that applies to id, or a DeniedError saying
// that none does.
func (p *Policy) Match(id Identity) (*Rule, error) {
	for i := range p.Rules {
		if p.Rules[i].Client.Matches(id) {
			return &p.Rules[i], nil
		}
	}
	return nil, &DeniedError{Msg: fmt.Sprintf("no authorization rule matches %s", id)}
}

// CheckPublish returns a DeniedError unless m is inside the rule's publish
// side; index is the message's index on its stream, for the error.
func (r *Rule) CheckPublish(m content.Message, index uint64) error {
	if r.Publish.Allows(m) {
		return nil
	}
	if r.Publish.IsNone() {
		return &DeniedError{Rule: r.Name, Msg: fmt.Sprintf("authorization rule %q allows no publishing", r.Name)}
	}
	return &DeniedError{Rule: r.Name, Msg: fmt.Sprintf("message %d is outside what authorization rule %q allows to publish (%s); nothing of its request was published", index, r.Name, r.Publish)}
}

// LimitError is a conjunction over the broker's predicate limits; the
// broker returns it as InvalidArgument.
type LimitError struct{ Msg string }

func (e *LimitError) Error() string { return e.Msg }

// Conjoin returns p restricted to the rule's subscribe side: p itself for
// all, a DeniedError for none, else p ∧ q distributed into a disjunction of
// filters (every filter of p joined with every filter of q, constraints
// repeated in both kept once). The result must respect l as a subscriber's
// own predicate does, or Conjoin returns a LimitError naming the limit and
// the rule. A message matches the result exactly when it matches both p
// and q.
func (r *Rule) Conjoin(p content.Predicate, l content.Limits) (content.Predicate, error) {
	s := r.Subscribe
	switch {
	case s.IsAll():
		return p, nil
	case s.IsNone():
		return nil, &DeniedError{Rule: r.Name, Msg: fmt.Sprintf("authorization rule %q allows no subscriptions", r.Name)}
	}
	q := s.Predicate()
	if n := len(p) * len(q); l.MaxFilters > 0 && n > l.MaxFilters {
		return nil, &LimitError{Msg: fmt.Sprintf("the predicate's %d filters joined with the %d of authorization rule %q make %d, over the limit of %d filters: subscribe with fewer",
			len(p), len(q), r.Name, n, l.MaxFilters)}
	}
	out := make(content.Predicate, 0, len(p)*len(q))
	for _, f := range p {
		for _, g := range q {
			h := make(content.Filter, len(f), len(f)+len(g))
			copy(h, f)
			for _, c := range g {
				if !containsConstraint(f, c) {
					h = append(h, c)
				}
			}
			if l.MaxConstraints > 0 && len(h) > l.MaxConstraints {
				return nil, &LimitError{Msg: fmt.Sprintf("a filter of the predicate joined with one of authorization rule %q has %d constraints, over the limit of %d: subscribe with fewer",
					r.Name, len(h), l.MaxConstraints)}
			}
			out = append(out, h)
		}
	}
	return out, nil
}

func containsConstraint(f content.Filter, c content.Constraint) bool {
	for _, d := range f {
		if d == c {
			return true
		}
	}
	return false
}

// CheckLimits reports a rule whose subscribe predicate alone breaks l: no
// subscription of its clients could ever be installed.
func (p *Policy) CheckLimits(l content.Limits) error {
	for _, r := range p.Rules {
		q := r.Subscribe.Predicate()
		if q == nil {
			continue
		}
		if l.MaxFilters > 0 && len(q) > l.MaxFilters {
			return fmt.Errorf("authorization policy %s: rule %q (line %d): field subscribe: %d filters, over the broker's limit of %d", p.File, r.Name, r.Line, len(q), l.MaxFilters)
		}
		for _, f := range q {
			if l.MaxConstraints > 0 && len(f) > l.MaxConstraints {
				return fmt.Errorf("authorization policy %s: rule %q (line %d): field subscribe: a filter of %d constraints, over the broker's limit of %d", p.File, r.Name, r.Line, len(f), l.MaxConstraints)
			}
		}
	}
	return nil
}
