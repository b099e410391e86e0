package systems

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/testbed/stomp"
	"github.com/dripmesh/drip/internal/workload"
)

func TestSelector(t *testing.T) {
	tests := []struct{ pred, want string }{
		{`a = "market"`, `a = 'market'`},
		{`a != "x"`, `a <> 'x'`},
		{`a = "it's"`, `a = 'it''s'`},
		{`n = 17`, `n = 1.7E+01`},
		{`n = 50`, `n = 5.0E+01`},
		{`n < 50`, `n < 5.0E+01`},
		{`n <= -2.5`, `n <= -2.5E+00`},
		{`n > 0`, `n > 0.0E+00`},
		{`n >= 1e300`, `n >= 1.0E+300`},
		{`n != 3`, `n <> 3.0E+00`},
		{`b = true`, `b = TRUE`},
		{`b != false`, `b <> FALSE`},
		{`s prefix "mar"`, `s LIKE 'mar%' ESCAPE '\'`},
		{`s suffix "ket"`, `s LIKE '%ket' ESCAPE '\'`},
		{`s contains "rke"`, `s LIKE '%rke%' ESCAPE '\'`},
		{`s contains "50%_\\'"`, `s LIKE '%50\%\_\\''%' ESCAPE '\'`},
		{`s prefix ""`, `s LIKE '%' ESCAPE '\'`},
		{`x exists`, `x IS NOT NULL`},
		{`a = 1 && b = 2`, `a = 1.0E+00 AND b = 2.0E+00`},
		{`a = 1 || b = 2`, `a = 1.0E+00 OR b = 2.0E+00`},
		// AND binds tighter than OR in both languages; parentheses keep
		// it obvious.
		{`a = 1 && b = 2 || c = 3`, `(a = 1.0E+00 AND b = 2.0E+00) OR c = 3.0E+00`},
		{`"$x_1" = "a"`, `$x_1 = 'a'`},
	}
	for _, tt := range tests {
		got, err := Selector(content.MustParse(tt.pred))
		require.NoError(t, err, tt.pred)
		assert.Equal(t, tt.want, got, tt.pred)
	}
	sel, err := Selector(content.Predicate{})
	require.NoError(t, err)
	assert.Equal(t, "1 = 0", sel, "an empty predicate matches nothing")
	sel, err = Selector(content.Predicate{{}, {{Name: "a", Op: content.OpExists}}})
	require.NoError(t, err)
	assert.Equal(t, "1 = 1 OR a IS NOT NULL", sel, "an empty filter matches everything")
}

func TestSelectorErrors(t *testing.T) {
	tests := []struct{ pred, want string }{
		{`s < "m"`, "compare strings with = and <> only"},
		{`s >= "m"`, "compare strings with = and <> only"},
		{`"a-b" = 1`, `"a-b" is not a JMS identifier`},
		{`"1a" = 1`, `"1a" is not a JMS identifier`},
		{`"é" = 1`, `not a JMS identifier`},
		{`"like" = 1`, `"like" is a JMS selector keyword`},
		{`"NULL" = 1`, `is a JMS selector keyword`},
		{`JMSPriority = 1`, `starts with JMS`},
		{`a = 1 || JMSXGroupID = "g"`, `filter 1, constraint 0`},
	}
	for _, tt := range tests {
		_, err := Selector(content.MustParse(tt.pred))
		require.Error(t, err, tt.pred)
		assert.Contains(t, err.Error(), tt.want, tt.pred)
	}
}

// jmsEval evaluates a constraint the way ActiveMQ evaluates its selector
// over STOMP (every property a string; numbers compared after
// Double.valueOf; LIKE on the text; NULL for a missing property), for the
// property test below. It models the translation, not ActiveMQ's parser:
// the real thing is checked in TestActiveMQSelectorsAgainstOracle.
func jmsEval(c content.Constraint, m content.Message) bool {
	v, ok := m.Get(c.Name)
	if !ok {
		return false // NULL: unknown, not selected
	}
	text := stompValue(v)
	switch c.Op {
	case content.OpExists:
		return true
	case content.OpEq, content.OpNe:
		var eq bool
		switch c.Value.Kind() {
		case content.KindString:
			eq = text == c.Value.Str()
		case content.KindBool:
			eq = (text == "true") == c.Value.Bool()
		default:
			f, err := parseJavaDouble(text)
			eq = err == nil && f == c.Value.Float()
		}
		return eq == (c.Op == content.OpEq)
	case content.OpPrefix, content.OpSuffix, content.OpContains:
		return content.Constraint{Name: c.Name, Op: c.Op, Value: c.Value}.Matches(content.String(text))
	default:
		f, err := parseJavaDouble(text)
		if err != nil {
			return false
		}
		return content.Constraint{Name: c.Name, Op: c.Op, Value: content.Float(c.Value.Float())}.Matches(content.Float(f))
	}
}

// Carzaniga09 §5.2.1 compares the systems on the same workload: on the
// experiments' workloads (every name has one type) the translated selector
// selects exactly the messages the predicate matches.
func TestSelectorAgreesOnWorkloads(t *testing.T) {
	for _, wc := range []workload.Config{workload.SingleConstraint(), workload.Default()} {
		for seed := int64(1); seed <= 3; seed++ {
			wc.Seed = seed
			wc.Names = 12 // dense, so that constraints often apply
			g, err := workload.New(wc)
			require.NoError(t, err)
			preds := g.Predicates(20)
			msgs := g.Messages(300)
			for _, p := range preds {
				_, err := Selector(p)
				require.NoError(t, err)
				for _, m := range msgs {
					jms := false
					for _, f := range p {
						all := true
						for _, c := range f {
							all = all && jmsEval(c, m)
						}
						jms = jms || all
					}
					require.Equal(t, p.Matches(m), jms, "%s on %s", p, m)
				}
			}
		}
	}
}

// The documented differences, in the same model: each case is one where
// JMS over STOMP and content.Predicate.Matches disagree.
func TestSelectorDocumentedDifferences(t *testing.T) {
	tests := []struct {
		pred string
		msg  map[string]content.Value
	}{
		{`a != 5`, map[string]content.Value{"a": content.String("market")}},
		{`a != "x"`, map[string]content.Value{"a": content.Int(5)}},
		{`a < 50`, map[string]content.Value{"a": content.String("42")}},
		{`a prefix "4"`, map[string]content.Value{"a": content.Int(42)}},
		{`a = "17"`, map[string]content.Value{"a": content.Int(17)}},
		{`a = true`, map[string]content.Value{"a": content.String("true")}},
	}
	for _, tt := range tests {
		p := content.MustParse(tt.pred)
		m := content.MessageFrom(tt.msg)
		assert.NotEqual(t, p.Matches(m), jmsEval(p[0][0], m), "%s on %s", tt.pred, m)
	}
}

// parseJavaDouble stands in for Java's Double.valueOf on the decimal texts
// stompValue writes.
func parseJavaDouble(s string) (float64, error) { return strconv.ParseFloat(strings.TrimSpace(s), 64) }

// A publisher's headers: persistent:false, then one property per
// attribute in the message's (name) order, as the text selectors compare;
// names a selector cannot use or ActiveMQ would interpret are refused.
func TestActiveMQHeaders(t *testing.T) {
	m, err := content.NewMessage([]content.Attribute{
		{Name: "symbol", Value: content.String("DRIP")}, {Name: "n", Value: content.Int(-3)},
		{Name: "px", Value: content.Float(2.5)}, {Name: "ok", Value: content.Bool(true)},
	}, nil)
	require.NoError(t, err)
	h, err := ActiveMQHeaders(m)
	require.NoError(t, err)
	assert.Equal(t, []stomp.Header{{Key: "persistent", Value: "false"}, {Key: "n", Value: "-3"}, {Key: "ok", Value: "true"},
		{Key: "px", Value: "2.5"}, {Key: "symbol", Value: "DRIP"}}, h)

	for name, want := range map[string]string{"id": "collides with a STOMP header", "activemqX": "collides", "JMSType": "reserves", "a-b": "not a JMS identifier"} {
		m, err := content.NewMessage([]content.Attribute{{Name: name, Value: content.Int(1)}}, nil)
		require.NoError(t, err)
		_, err = ActiveMQHeaders(m)
		assert.ErrorContains(t, err, want, name)
	}
}
