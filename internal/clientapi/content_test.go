package clientapi

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/wire"
)

func TestMessageRoundTrip(t *testing.T) {
	m := content.MessageFrom(map[string]content.Value{
		"s": content.String("x\x00y"), "i": content.Int(math.MinInt64),
		"f": content.Float(-0.5), "b": content.Bool(true),
	})
	m.Payload = []byte("payload")
	got, err := MessageFromProto(MessageToProto(m), wire.DefaultMessageLimits())
	require.NoError(t, err)
	assert.Equal(t, m, got)
}

func TestPredicateRoundTrip(t *testing.T) {
	p := content.MustParse(`a = "x" && b > 2.5 || c exists || d prefix "p" && e != false`)
	got, err := PredicateFromProto(PredicateToProto(p), content.DefaultLimits())
	require.NoError(t, err)
	assert.Equal(t, p.String(), got.String())
}

func TestPredicateTextAndFiltersAreOred(t *testing.T) {
	pp := PredicateToProto(content.MustParse(`a = 1`))
	pp.Text = `b = 2`
	got, err := PredicateFromProto(pp, content.DefaultLimits())
	require.NoError(t, err)
	assert.Equal(t, `b = 2 || a = 1`, got.String())
}

func TestMessageErrors(t *testing.T) {
	str := func(s string) *dripv1.Value { return &dripv1.Value{Kind: &dripv1.Value_StringValue{StringValue: s}} }
	lim := wire.MessageLimits{MaxAttributes: 2, MaxName: 4, MaxString: 3, MaxPayload: 5}
	tests := []struct {
		name string
		msg  *dripv1.Message
		want string
	}{
		{"nil", nil, "missing"},
		{"too many attributes", &dripv1.Message{Attributes: []*dripv1.Attribute{{Name: "a", Value: str("")}, {Name: "b", Value: str("")}, {Name: "c", Value: str("")}}}, "3 attributes, over the limit of 2"},
		{"payload", &dripv1.Message{Payload: []byte("123456")}, "payload is 6 bytes"},
		{"long name", &dripv1.Message{Attributes: []*dripv1.Attribute{{Name: "abcde", Value: str("")}}}, "attribute 0: name is 5 bytes"},
		{"long value", &dripv1.Message{Attributes: []*dripv1.Attribute{{Name: "a", Value: str("abcd")}}}, `attribute "a": string value is 4 bytes`},
		{"unset value", &dripv1.Message{Attributes: []*dripv1.Attribute{{Name: "a"}}}, `attribute "a": value is unset`},
		{"duplicate", &dripv1.Message{Attributes: []*dripv1.Attribute{{Name: "a", Value: str("")}, {Name: "a", Value: str("")}}}, "attribute a given twice"},
		{"empty name", &dripv1.Message{Attributes: []*dripv1.Attribute{{Name: "", Value: str("")}}}, "empty name"},
		{"congestion header", &dripv1.Message{Congestion: make([]byte, wire.MaxCongestionHeader+1)}, "congestion header is 4097 bytes, over the limit of 4096"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := MessageFromProto(tt.msg, lim)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			if tt.msg != nil {
				// The brokers' path says the same.
				_, err = wire.DecodeMessage(marshal(t, tt.msg), lim)
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.want)
			}
		})
	}
	// A header within the limit passes, unread.
	m := &dripv1.Message{Attributes: []*dripv1.Attribute{{Name: "a", Value: str("x")}}, Congestion: make([]byte, wire.MaxCongestionHeader)}
	got, err := wire.DecodeMessage(marshal(t, m), lim)
	require.NoError(t, err)
	assert.Equal(t, "[a=\"x\"]", got.String())
}

func TestPredicateErrors(t *testing.T) {
	c := func(name string, op dripv1.Op, v *dripv1.Value) *dripv1.Filter {
		return &dripv1.Filter{Constraints: []*dripv1.Constraint{{Name: name, Op: op, Value: v}}}
	}
	i := &dripv1.Value{Kind: &dripv1.Value_IntValue{IntValue: 1}}
	nan := &dripv1.Value{Kind: &dripv1.Value_FloatValue{FloatValue: math.NaN()}}
	lim := content.Limits{MaxFilters: 2, MaxConstraints: 1, MaxString: 3, MaxName: 4}
	tests := []struct {
		name string
		pred *dripv1.Predicate
		want string
	}{
		{"nil", nil, "empty"},
		{"empty", &dripv1.Predicate{}, "empty"},
		{"text parse error", &dripv1.Predicate{Text: `a = `}, "at byte 4"},
		{"unknown op", &dripv1.Predicate{Filters: []*dripv1.Filter{c("a", 99, i)}}, "filter 0: constraint 0: unknown operator 99"},
		{"unspecified op", &dripv1.Predicate{Filters: []*dripv1.Filter{c("a", dripv1.Op_OP_UNSPECIFIED, i)}}, "unknown operator 0"},
		{"op on wrong kind", &dripv1.Predicate{Filters: []*dripv1.Filter{c("a", dripv1.Op_OP_PREFIX, i)}}, "does not apply to int"},
		{"exists with value", &dripv1.Predicate{Filters: []*dripv1.Filter{c("a", dripv1.Op_OP_EXISTS, i)}}, "exists takes no value"},
		{"missing value", &dripv1.Predicate{Filters: []*dripv1.Filter{c("a", dripv1.Op_OP_EQ, nil)}}, "does not apply"},
		{"nan", &dripv1.Predicate{Filters: []*dripv1.Filter{c("a", dripv1.Op_OP_EQ, nan)}}, "finite"},
		{"long name", &dripv1.Predicate{Filters: []*dripv1.Filter{c("abcde", dripv1.Op_OP_EXISTS, nil)}}, "name is 5 bytes"},
		{"empty filter", &dripv1.Predicate{Filters: []*dripv1.Filter{{}}}, "filter 0: filter has no constraints"},
		{"too many filters", &dripv1.Predicate{Text: "a = 1 || b = 2", Filters: []*dripv1.Filter{c("a", dripv1.Op_OP_EXISTS, nil)}}, "3 filters, over the limit of 2"},
		{"too many constraints", &dripv1.Predicate{Filters: []*dripv1.Filter{{Constraints: []*dripv1.Constraint{{Name: "a", Op: dripv1.Op_OP_EXISTS}, {Name: "b", Op: dripv1.Op_OP_EXISTS}}}}}, "2 constraints, over the limit of 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := PredicateFromProto(tt.pred, lim)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// FuzzDecodeClientRequests feeds arbitrary bytes through protobuf decoding
// and conversion of both client request kinds: nothing may panic, and what is
// accepted must convert back and forth stably.
func FuzzDecodeClientRequests(f *testing.F) {
	seed, _ := proto.Marshal(&dripv1.PublishRequest{Message: MessageToProto(content.MessageFrom(map[string]content.Value{"a": content.Int(1)}))})
	f.Add(seed)
	seed, _ = proto.Marshal(&dripv1.SubscribeRequest{Predicate: &dripv1.Predicate{Text: `a = 1 || b prefix "x"`}})
	f.Add(seed)
	seed, _ = proto.Marshal(&dripv1.SubscribeRequest{Predicate: PredicateToProto(content.MustParse(`a exists && b >= 2.5`))})
	f.Add(seed)
	f.Add([]byte{0x0a, 0x02, 0x0a, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		var pub dripv1.PublishRequest
		if proto.Unmarshal(b, &pub) == nil {
			if m, err := MessageFromProto(pub.Message, wire.DefaultMessageLimits()); err == nil {
				again, err := MessageFromProto(MessageToProto(m), wire.DefaultMessageLimits())
				require.NoError(t, err)
				require.Equal(t, m.String(), again.String())
			}
		}
		var sub dripv1.SubscribeRequest
		if proto.Unmarshal(b, &sub) == nil {
			if p, err := PredicateFromProto(sub.Predicate, content.DefaultLimits()); err == nil {
				require.NoError(t, p.Validate())
				text := p.String()
				again, err := content.Parse(text)
				require.NoError(t, err, "canonical text %q must parse", text)
				require.Equal(t, text, again.String())
				require.False(t, strings.Contains(text, "<invalid>"))
			}
		}
	})
}

func marshal(t testing.TB, m proto.Message) []byte {
	b, err := proto.Marshal(m)
	require.NoError(t, err)
	return b
}
