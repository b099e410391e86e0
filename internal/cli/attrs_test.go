package cli

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/client"
)

func TestParseAttr(t *testing.T) {
	tests := []struct {
		in   string
		name string
		want any
	}{
		{`agency=AP`, "agency", "AP"},
		{`agency="AP"`, "agency", "AP"},
		{`title="a \"quoted\" word\n"`, "title", "a \"quoted\" word\n"},
		{`raw="\x00\xff"`, "raw", "\x00\xff"},
		{`empty=""`, "empty", ""},
		{`title=hello world`, "title", "hello world"},
		{`expr="a=b"`, "expr", "a=b"},
		{`expr=a=b`, "expr", "a=b"},
		{`n=3`, "n", int64(3)},
		{`n=-3`, "n", int64(-3)},
		{`n=+3`, "n", int64(3)},
		{`n= 3 `, "n", int64(3)},
		{`n=9223372036854775807`, "n", int64(math.MaxInt64)},
		{`f=2.5`, "f", 2.5},
		{`f=3.0`, "f", 3.0},
		{`f=.5`, "f", 0.5},
		{`f=1e3`, "f", 1000.0},
		{`f=-1.5E-3`, "f", -0.0015},
		{`b=true`, "b", true},
		{`b=false`, "b", false},
		{`b=True`, "b", "True"},
		{`w=trueish`, "w", "trueish"},
		{`v=v1.2.3`, "v", "v1.2.3"},
		{`a.b-c/d=x`, "a.b-c/d", "x"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			name, v, err := parseAttr(tt.in)
			require.NoError(t, err)
			assert.Equal(t, tt.name, name)
			assert.Equal(t, tt.want, v)
		})
	}
}

func TestParseAttrErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{`agency`, "--attr agency: want name=value"},
		{`=3`, "the attribute name before '=' is empty"},
		{`n=`, `attribute "n": the value is empty; write "" for an empty string`},
		{`n=  `, "the value is empty"},
		{`n=3x`, `attribute "n": at byte 1 of 3x:`},
		{`n=3x`, "quote the value to publish a string"},
		{`n=1.2.3`, "1.2.3"},
		{`n=-`, "at byte 0 of -: expected a number"},
		{`n=99999999999999999999`, "does not fit in int64"},
		{`f=1e999`, "out-of-range float"},
		{`n=1_000`, "digit separators"},
		{`s="open`, "at byte 0 of \"open: unterminated string"},
		{`s="bad\q"`, "unknown escape"},
		{`s="a" "b"`, `at byte 4 of "a" "b"`},
		{`n=1 && b = 2`, "1 && b = 2 is not a single value"},
		{`n=1 || b exists`, "is not a single value"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, _, err := parseAttr(tt.in)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	_, err := parseAttrFlags([]string{"a=1", "b=2", "a=3"})
	assert.ErrorContains(t, err, `--attr a=3: attribute "a" given twice`)
	attrs, err := parseAttrFlags([]string{"a=1", "b=x"})
	require.NoError(t, err)
	assert.Equal(t, client.Attrs{"a": int64(1), "b": "x"}, attrs)
}

func TestParseJSONMessage(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want client.Message
	}{
		{"types", `{"attrs":{"a":"x","n":3,"f":2.5,"b":true},"payload":"text"}`,
			client.Message{Attrs: client.Attrs{"a": "x", "n": int64(3), "f": 2.5, "b": true}, Payload: []byte("text")}},
		{"float forms", `{"attrs":{"a":3.0,"b":1e3,"c":-2E-2,"d":-0}}`,
			client.Message{Attrs: client.Attrs{"a": 3.0, "b": 1000.0, "c": -0.02, "d": int64(0)}}},
		{"int extremes", `{"attrs":{"max":9223372036854775807,"min":-9223372036854775808}}`,
			client.Message{Attrs: client.Attrs{"max": int64(math.MaxInt64), "min": int64(math.MinInt64)}}},
		{"unicode and escapes", `{"attrs":{"é":"\u00e9\n","k":""}}`, client.Message{Attrs: client.Attrs{"é": "é\n", "k": ""}}},
		{"binary payload", `{"attrs":{"a":1},"payload_b64":"AP8="}`, client.Message{Attrs: client.Attrs{"a": int64(1)}, Payload: []byte{0, 0xff}}},
		{"no attrs", `{"payload":"p"}`, client.Message{Attrs: client.Attrs{}, Payload: []byte("p")}},
		{"null attrs", `{"attrs":null}`, client.Message{Attrs: client.Attrs{}}},
		{"empty object", `{}`, client.Message{Attrs: client.Attrs{}}},
		{"spaces around", "  {\"attrs\" : { \"a\" : 1 } }  ", client.Message{Attrs: client.Attrs{"a": int64(1)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := parseJSONMessage([]byte(tt.in))
			require.NoError(t, err)
			assert.Equal(t, tt.want, m)
		})
	}
}

func TestParseJSONMessageErrors(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"empty", ``, "empty JSON"},
		{"not JSON", `attrs: {}`, "invalid JSON at byte 1"},
		{"truncated", `{"attrs":{"a":1}`, "incomplete JSON object"},
		{"array", `[1,2]`, "want a JSON object"},
		{"string", `"x"`, "want a JSON object"},
		{"unknown field", `{"attrs":{},"ingress":3}`, `unknown field "ingress" (want attrs, payload or payload_b64)`},
		{"payload not a string", `{"payload":3}`, "payload: want a string, found a JSON number"},
		{"b64 not a string", `{"payload_b64":true}`, "payload_b64: want a string, found a JSON bool"},
		{"both payloads", `{"payload":"a","payload_b64":"YQ=="}`, `give "payload" or "payload_b64", not both`},
		{"bad base64", `{"payload_b64":"!!"}`, "payload_b64: illegal base64 data at input byte 0"},
		{"attrs not object", `{"attrs":[1]}`, "attrs: want an object of name: value"},
		{"attrs a string", `{"attrs":"a=1"}`, "attrs: want an object"},
		{"null value", `{"attrs":{"a":null}}`, `attrs: attribute "a": null is not a value`},
		{"array value", `{"attrs":{"a":[1]}}`, `attrs: attribute "a": arrays and objects are not values`},
		{"object value", `{"attrs":{"a":{"b":1}}}`, `attrs: attribute "a": arrays and objects are not values`},
		{"duplicate", `{"attrs":{"a":1,"b":2,"a":3}}`, `attrs: attribute "a" given twice`},
		{"empty name", `{"attrs":{"":1}}`, "attrs: an attribute name is empty"},
		{"int overflow", `{"attrs":{"n":9223372036854775808}}`, `attribute "n": integer 9223372036854775808 does not fit in int64; write 9223372036854775808.0 for a float`},
		{"float overflow", `{"attrs":{"f":1e999}}`, `attribute "f": number 1e999 is out of float64 range`},
		{"trailing data", `{"attrs":{}} {"attrs":{}}`, "unexpected data after the JSON object"},
		{"trailing garbage", `{"attrs":{}} x`, "unexpected data after the JSON object"},
		{"value not UTF-8", "{\"attrs\":{\"s\":\"a\xff\"}}", "not valid UTF-8 at byte 16"},
		{"name not UTF-8", "{\"attrs\":{\"\xc3\":1}}", "not valid UTF-8 at byte 11"},
		{"payload not UTF-8", "{\"payload\":\"\xe2\x82\"}", "not valid UTF-8 at byte 12"},
		{"lone surrogate", `{"attrs":{"s":"\ud800"}}`, `attribute "s": a \u escape that is no character`},
		{"lone surrogate payload", `{"payload":"\udc00x"}`, `payload: a \u escape that is no character`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseJSONMessage([]byte(tt.in))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// U+FFFD given as itself or as an escape is a character like any other.
func TestParseJSONMessageKeepsReplacementCharacter(t *testing.T) {
	for _, in := range []string{`{"attrs":{"s":"\ufffd"}}`, "{\"attrs\":{\"s\":\"\uFFFD\"}}", `{"attrs":{"s":"\uFFFD"}}`} {
		m, err := parseJSONMessage([]byte(in))
		require.NoError(t, err, in)
		assert.Equal(t, "\uFFFD", m.Attrs["s"], in)
	}
}

func TestAppendDeliveryJSON(t *testing.T) {
	lat := 1.25
	d := client.Delivery{
		Message: client.Message{Attrs: client.Attrs{
			"s": "x\"y", "i": int64(-3), "f": 3.0, "g": 2.5, "e": 1e21, "b": false,
			"nan": math.NaN(), "inf": math.Inf(1), "ninf": math.Inf(-1), "<html>": "&",
		}, Payload: []byte("héllo")},
		Ingress: 3, Hops: 2, PublishedAt: time.Now(),
	}
	got := string(appendDeliveryJSON(nil, d, &lat))
	assert.Equal(t, `{"attrs":{"\u003chtml\u003e":"\u0026","b":false,"e":1e+21,"f":3.0,"g":2.5,"i":-3,"inf":"+Inf","nan":"NaN","ninf":"-Inf","s":"x\"y"},"payload":"héllo","ingress":3,"hops":2,"latency_ms":1.250}`+"\n", got)
	require.True(t, json.Valid([]byte(got)))

	d = client.Delivery{Message: client.Message{Attrs: client.Attrs{}, Payload: []byte{0xff, 0}}}
	assert.Equal(t, `{"attrs":{},"payload_b64":"/wA=","ingress":0,"hops":0}`+"\n", string(appendDeliveryJSON(nil, d, nil)))
	assert.Equal(t, `{"lost":3,"total":10}`+"\n", string(appendLostJSON(nil, 3, 10)))
}

// What sub prints, pub reads back with the same types and values: the
// attrs and payload of sub's JSON lines are pub's input format.
func TestDeliveryJSONRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for range 2000 {
		attrs := client.Attrs{}
		for k := range r.IntN(6) {
			name := randString(r) + string(rune('a'+k)) // distinct names
			switch r.IntN(4) {
			case 0:
				attrs[name] = randString(r)
			case 1:
				attrs[name] = int64(r.Uint64())
			case 2:
				attrs[name] = math.Float64frombits(r.Uint64())
				if f := attrs[name].(float64); math.IsNaN(f) || math.IsInf(f, 0) {
					attrs[name] = float64(r.IntN(1000)) // integral floats must stay floats
				}
			case 3:
				attrs[name] = r.IntN(2) == 0
			}
		}
		payload := []byte(randString(r))
		if r.IntN(3) == 0 {
			payload = append(payload, 0xff)
		}
		line := appendDeliveryJSON(nil, client.Delivery{Message: client.Message{Attrs: attrs, Payload: payload}, Ingress: 1}, nil)
		var obj map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(line, &obj), "%s", line)
		delete(obj, "ingress")
		delete(obj, "hops")
		input, err := json.Marshal(obj)
		require.NoError(t, err)
		m, err := parseJSONMessage(input)
		require.NoError(t, err, "%s", input)
		require.Equal(t, attrs, m.Attrs, "%s", line)
		require.Equal(t, payload, m.Payload)
	}
}

// randString returns valid UTF-8 with quotes, escapes and non-ASCII.
func randString(r *rand.Rand) string {
	alphabet := []rune("ab\"\\\n\t é€😀<&\x00")
	var b strings.Builder
	for range r.IntN(8) {
		b.WriteRune(alphabet[r.IntN(len(alphabet))])
	}
	return b.String()
}

func FuzzParseJSONMessage(f *testing.F) {
	f.Add([]byte(`{"attrs":{"a":"x","n":3,"f":2.5,"b":true},"payload":"text"}`))
	f.Add([]byte(`{"attrs":{"a":1e3},"payload_b64":"AP8="}`))
	f.Add([]byte(`{"attrs":{"a":{"b":[1,null]}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseJSONMessage(b)
		if err != nil {
			return
		}
		// Whatever is accepted prints and parses back to itself.
		line := appendDeliveryJSON(nil, client.Delivery{Message: m}, nil)
		var obj map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(line, &obj))
		again, err := parseJSONAttrs(obj["attrs"])
		require.NoError(t, err, "%s", line)
		for name, v := range m.Attrs {
			if s, ok := v.(string); ok && !utf8.ValidString(s) {
				continue // printed with U+FFFD, like encoding/json
			}
			require.Equal(t, v, again[name], "%s", line)
		}
	})
}

func FuzzParseLiteral(f *testing.F) {
	for _, s := range []string{`"x\n"`, `3`, `-2.5e3`, `true`, `word`, `3x`, `"a" && b`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseLiteral(s)
		if err != nil {
			return
		}
		switch v.(type) {
		case string, int64, float64, bool:
		default:
			t.Fatalf("parseLiteral(%q) = %T", s, v)
		}
	})
}

func TestRateValue(t *testing.T) {
	for in, want := range map[string]float64{"100": 100, "100/s": 100, "2.5/s": 2.5, "0": 0, " 7 ": 7} {
		var r rateValue
		require.NoError(t, r.Set(in), in)
		assert.Equal(t, want, float64(r), in)
	}
	for _, in := range []string{"", "-1", "fast", "NaN", "Inf", "100/m", "1e999"} {
		var r rateValue
		assert.ErrorContains(t, r.Set(in), "want messages per second", in)
	}
	r := rateValue(2.5)
	assert.Equal(t, "2.5/s", r.String())
}
