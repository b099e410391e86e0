package content

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewMessage(t *testing.T) {
	m, err := NewMessage([]Attribute{
		{"b", Int(2)}, {"a", String("x")}, {"c", Bool(true)},
	}, []byte("payload"))
	require.NoError(t, err)
	assert.Equal(t, []Attribute{{"a", String("x")}, {"b", Int(2)}, {"c", Bool(true)}}, m.Attributes(), "sorted by name")
	assert.Equal(t, 3, m.Len())
	assert.Equal(t, []byte("payload"), m.Payload)

	empty, err := NewMessage(nil, nil)
	require.NoError(t, err)
	assert.Equal(t, 0, empty.Len())
}

func TestNewMessageDoesNotAliasInput(t *testing.T) {
	in := []Attribute{{"b", Int(2)}, {"a", Int(1)}}
	m, err := NewMessage(in, nil)
	require.NoError(t, err)
	assert.Equal(t, []Attribute{{"b", Int(2)}, {"a", Int(1)}}, in, "input order kept")
	in[0].Value = Int(99)
	v, _ := m.Get("b")
	assert.Equal(t, Int(2), v)
}

func TestNewMessageErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		attrs   []Attribute
		wantErr string
	}{
		{"empty name", []Attribute{{"a", Int(1)}, {"", Int(2)}}, "message attribute 1: empty name"},
		{"invalid value", []Attribute{{"a", Int(1)}, {"b", Int(2)}, {"c", Value{}}}, "message attribute 2 (c): invalid value"},
		{"invalid value odd name", []Attribute{{"a b", Value{}}}, `message attribute 0 ("a b"): invalid value`},
		{"duplicate", []Attribute{{"a", Int(1)}, {"b", Int(2)}, {"a", String("x")}}, "message attribute a given twice"},
		{"duplicate same value", []Attribute{{"z", Int(1)}, {"z", Int(1)}}, "message attribute z given twice"},
		{"duplicate odd name", []Attribute{{"exists", Int(1)}, {"exists", Int(1)}}, `message attribute "exists" given twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewMessage(tc.attrs, nil)
			require.Error(t, err)
			assert.Equal(t, tc.wantErr, err.Error())
		})
	}
}

func TestMessageFromPanics(t *testing.T) {
	assert.Panics(t, func() { MessageFrom(map[string]Value{"": Int(1)}) })
	assert.Panics(t, func() { MessageFrom(map[string]Value{"a": {}}) })
	assert.NotPanics(t, func() { MessageFrom(nil) })
}

// Get switches from a linear scan to binary search above 16 attributes:
// check both regimes, and every size around the switch, against a map.
func TestMessageGet(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for n := 0; n <= 40; n++ {
		want := map[string]Value{}
		var attrs []Attribute
		for _, i := range rng.Perm(n) {
			name := fmt.Sprintf("n%02d", 2*i) // odd numbers are absent
			want[name] = Int(int64(i))
			attrs = append(attrs, Attribute{name, Int(int64(i))})
		}
		m, err := NewMessage(attrs, nil)
		require.NoError(t, err)
		require.Equal(t, n, m.Len())
		for i := -1; i <= 2*n+1; i++ {
			name := fmt.Sprintf("n%02d", i)
			v, ok := m.Get(name)
			w, wok := want[name]
			require.Equal(t, wok, ok, "n=%d Get(%q)", n, name)
			require.Equal(t, w, v, "n=%d Get(%q)", n, name)
		}
		for _, name := range []string{"", "a", "n", "zzz", "n0", "n000"} {
			_, ok := m.Get(name)
			assert.False(t, ok, "n=%d Get(%q)", n, name)
		}
	}
}

func TestMessageGetBytewiseNames(t *testing.T) {
	// Names that sort differently bytewise than by Unicode or case.
	var attrs []Attribute
	names := []string{"B", "a", "é", "\xff", "a\x00", "Z", "_", "a.b", "a-b", "a/b", "1", " ", "\"", "zz", "y", "x", "w", "v"}
	for i, n := range names {
		attrs = append(attrs, Attribute{n, Int(int64(i))})
	}
	m, err := NewMessage(attrs, nil)
	require.NoError(t, err)
	require.Greater(t, m.Len(), 16)
	for i, n := range names {
		v, ok := m.Get(n)
		require.True(t, ok, "%q", n)
		assert.Equal(t, Int(int64(i)), v, "%q", n)
	}
}

func TestMessageString(t *testing.T) {
	m := MessageFrom(map[string]Value{"b": Int(2), "a": String("x y"), "odd name": Bool(true), "f": Float(1)})
	assert.Equal(t, `[a="x y", b=2, f=1.0, "odd name"=true]`, m.String())
	assert.Equal(t, "[]", Message{}.String())
}
