package cli

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dripmesh/drip/client"
	"github.com/dripmesh/drip/internal/content"
)

// parseAttrFlags parses --attr name=value flags into attributes.
func parseAttrFlags(flags []string) (client.Attrs, error) {
	attrs := make(client.Attrs, len(flags))
	for _, f := range flags {
		name, v, err := parseAttr(f)
		if err != nil {
			return nil, err
		}
		if _, dup := attrs[name]; dup {
			return nil, fmt.Errorf("--attr %s: attribute %q given twice", f, name)
		}
		attrs[name] = v
	}
	return attrs, nil
}

// parseAttr parses one name=value. The name is everything before the first
// '='; the value is a literal of the predicate language (docs/design.md §1) or a
// bare word.
func parseAttr(s string) (name string, v any, err error) {
	name, text, ok := strings.Cut(s, "=")
	if !ok {
		return "", nil, fmt.Errorf("--attr %s: want name=value", s)
	}
	if name == "" {
		return "", nil, fmt.Errorf("--attr %s: the attribute name before '=' is empty", s)
	}
	v, err = parseLiteral(text)
	if err != nil {
		return "", nil, fmt.Errorf("--attr %s: attribute %q: %w", s, name, err)
	}
	return name, v, nil
}

// parseLiteral reads a value the way a predicate writes it: "quoted"
// strings with the predicate language's escapes, 3 (int64), 2.5 or 1e3
// (float64), true and false; anything else that starts like a word is that
// word as a string, so that --attr agency=AP needs no shell quoting of
// quotes. Text that starts like a number must be one: 3x is an error rather
// than a string, because it is most likely a typo.
func parseLiteral(text string) (any, error) {
	t := strings.TrimSpace(text)
	if t == "" {
		return nil, errors.New(`the value is empty; write "" for an empty string`)
	}
	switch c := t[0]; {
	case c == '"', c == '-', c == '+', c == '.', c >= '0' && c <= '9', t == "true", t == "false":
	default:
		return t, nil // a bare word
	}
	// Parse "_ = <literal>" so that literals mean exactly what they mean in
	// predicates, then map offsets back into the value.
	const prefix = "_ = "
	p, err := content.ParseWithLimits(prefix+t, content.Limits{})
	if err != nil {
		var pe *content.ParseError
		if errors.As(err, &pe) {
			msg := pe.Msg
			if c := t[0]; c != '"' {
				msg += `; quote the value to publish a string`
			}
			return nil, fmt.Errorf("at byte %d of %s: %s", pe.Offset-len(prefix), t, msg)
		}
		return nil, err
	}
	if len(p) != 1 || len(p[0]) != 1 {
		return nil, fmt.Errorf("%s is not a single value; quote it to publish a string", t)
	}
	switch v := p[0][0].Value; v.Kind() {
	case content.KindString:
		return v.Str(), nil
	case content.KindInt:
		return v.Int(), nil
	case content.KindFloat:
		return v.Float(), nil
	default:
		return v.Bool(), nil
	}
}

// jsonLine is the shape of a message on pub's standard input.
type jsonLine struct {
	Attrs      json.RawMessage `json:"attrs"`
	Payload    *string         `json:"payload"`
	PayloadB64 *string         `json:"payload_b64"`
}

// parseJSONMessage parses one JSON line:
//
//	{"attrs":{"a":"x","n":3,"f":2.5,"b":true},"payload":"text"}
//
// A number with no '.' or exponent is an int64 and any other a float64, as
// in predicates; "payload_b64" gives binary payloads in base64 instead of
// "payload". Errors name the attribute or field at fault.
func parseJSONMessage(line []byte) (client.Message, error) {
	// encoding/json would replace bytes that are not UTF-8 (and \u escapes
	// of lone surrogates) with U+FFFD and publish an altered message.
	if i := invalidUTF8At(line); i >= 0 {
		return client.Message{}, fmt.Errorf("not valid UTF-8 at byte %d (names, strings and payload text are UTF-8; give binary payloads in base64 under payload_b64)", i)
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var l jsonLine
	if err := dec.Decode(&l); err != nil {
		return client.Message{}, describeJSONError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return client.Message{}, errors.New("unexpected data after the JSON object")
	}
	var m client.Message
	attrs, err := parseJSONAttrs(l.Attrs)
	if err != nil {
		return client.Message{}, err
	}
	m.Attrs = attrs
	switch {
	case l.Payload != nil && l.PayloadB64 != nil:
		return client.Message{}, errors.New(`give "payload" or "payload_b64", not both`)
	case l.Payload != nil:
		m.Payload = []byte(*l.Payload)
	case l.PayloadB64 != nil:
		if m.Payload, err = base64.StdEncoding.DecodeString(*l.PayloadB64); err != nil {
			return client.Message{}, fmt.Errorf("payload_b64: %w", err)
		}
	}
	if !bytes.Contains(bytes.ToLower(line), []byte(`\ufffd`)) && !bytes.ContainsRune(line, utf8.RuneError) {
		// Any U+FFFD now came from a \u escape that names no character.
		for n, v := range m.Attrs {
			if s, _ := v.(string); strings.ContainsRune(n, utf8.RuneError) || strings.ContainsRune(s, utf8.RuneError) {
				return client.Message{}, fmt.Errorf("attribute %q: a \\u escape that is no character (a lone surrogate)", n)
			}
		}
		if l.Payload != nil && strings.ContainsRune(*l.Payload, utf8.RuneError) {
			return client.Message{}, errors.New("payload: a \\u escape that is no character (a lone surrogate)")
		}
	}
	return m, nil
}

// invalidUTF8At returns the offset of the first byte of b that is not
// part of valid UTF-8, or -1.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return -1
}

func describeJSONError(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te) && te.Field == "":
		return fmt.Errorf(`want a JSON object like {"attrs":{...},"payload":"..."}, found a JSON %s`, te.Value)
	case errors.As(err, &te):
		return fmt.Errorf("%s: want a %s, found a JSON %s", te.Field, te.Type, te.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return fmt.Errorf("unknown field %s (want attrs, payload or payload_b64)", strings.TrimPrefix(err.Error(), "json: unknown field "))
	case errors.As(err, &se):
		return fmt.Errorf("invalid JSON at byte %d: %v", se.Offset, se)
	case errors.Is(err, io.EOF):
		return errors.New("empty JSON")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("incomplete JSON object")
	default:
		return err
	}
}

// parseJSONAttrs walks the attrs object token by token, which keeps
// number literals intact (int or float) and catches names given twice,
// which decoding into a map would silently merge.
func parseJSONAttrs(raw json.RawMessage) (client.Attrs, error) {
	attrs := client.Attrs{}
	if len(raw) == 0 || string(raw) == "null" {
		return attrs, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New(`attrs: want an object of name: value`)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("attrs: %w", err)
		}
		name := tok.(string) // object keys are strings
		if name == "" {
			return nil, errors.New("attrs: an attribute name is empty")
		}
		if _, dup := attrs[name]; dup {
			return nil, fmt.Errorf("attrs: attribute %q given twice", name)
		}
		tok, err = dec.Token()
		if err != nil {
			return nil, fmt.Errorf("attrs: attribute %q: %w", name, err)
		}
		v, err := jsonValue(tok)
		if err != nil {
			return nil, fmt.Errorf("attrs: attribute %q: %w", name, err)
		}
		attrs[name] = v
	}
	return attrs, nil
}

func jsonValue(tok json.Token) (any, error) {
	switch x := tok.(type) {
	case string, bool:
		return x, nil
	case json.Number:
		s := string(x)
		if !strings.ContainsAny(s, ".eE") {
			i, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("integer %s does not fit in int64; write %s.0 for a float", s, s)
			}
			return i, nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("number %s is out of float64 range", s)
		}
		return f, nil
	case nil:
		return nil, errors.New("null is not a value; want a string, number or boolean")
	default:
		return nil, errors.New("arrays and objects are not values; want a string, number or boolean")
	}
}

// appendDeliveryJSON writes d as one JSON line for drip sub: attributes
// with their types kept (floats always carry a '.' or exponent so that they
// read back as floats; non-finite floats, which JSON cannot express, become
// the strings "NaN", "+Inf" and "-Inf"), the payload as a string when it is
// UTF-8 and in base64 under payload_b64 otherwise, and latency_ms from the
// ingress broker's publication time when it gave one.
func appendDeliveryJSON(b []byte, d client.Delivery, latencyMS *float64) []byte {
	b = append(b, `{"attrs":{`...)
	names := make([]string, 0, len(d.Attrs))
	for n := range d.Attrs {
		names = append(names, n)
	}
	slices.Sort(names)
	for i, n := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, n)
		b = append(b, ':')
		b = appendJSONValue(b, d.Attrs[n])
	}
	b = append(b, '}')
	if utf8.Valid(d.Payload) {
		b = append(b, `,"payload":`...)
		b = appendJSONString(b, string(d.Payload))
	} else {
		b = append(b, `,"payload_b64":"`...)
		b = base64.StdEncoding.AppendEncode(b, d.Payload)
		b = append(b, '"')
	}
	b = append(b, `,"ingress":`...)
	b = strconv.AppendUint(b, uint64(d.Ingress), 10)
	b = append(b, `,"hops":`...)
	b = strconv.AppendInt(b, int64(d.Hops), 10)
	if latencyMS != nil {
		b = append(b, `,"latency_ms":`...)
		b = strconv.AppendFloat(b, *latencyMS, 'f', 3, 64)
	}
	if d.Elapsed > 0 {
		b = append(b, `,"mesh_ms":`...)
		b = strconv.AppendFloat(b, float64(d.Elapsed.Microseconds())/1000, 'f', 3, 64)
	}
	return append(b, "}\n"...)
}

func appendJSONValue(b []byte, v any) []byte {
	switch x := v.(type) {
	case string:
		return appendJSONString(b, x)
	case int64:
		return strconv.AppendInt(b, x, 10)
	case int:
		return strconv.AppendInt(b, int64(x), 10)
	case bool:
		return strconv.AppendBool(b, x)
	case float64:
		switch {
		case math.IsNaN(x):
			return append(b, `"NaN"`...)
		case math.IsInf(x, 1):
			return append(b, `"+Inf"`...)
		case math.IsInf(x, -1):
			return append(b, `"-Inf"`...)
		}
		start := len(b)
		b = strconv.AppendFloat(b, x, 'g', -1, 64)
		if !bytes.ContainsAny(b[start:], ".e") {
			b = append(b, ".0"...)
		}
		return b
	default:
		// The client delivers only the types above.
		return appendJSONString(b, fmt.Sprint(x))
	}
}

// appendJSONString writes s as a JSON string; bytes that are not UTF-8
// become U+FFFD, as encoding/json does.
func appendJSONString(b []byte, s string) []byte {
	enc, _ := json.Marshal(s) // a string always marshals
	return append(b, enc...)
}
