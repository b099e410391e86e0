package stomp

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func read(t *testing.T, wire string) (*Frame, error) {
	t.Helper()
	return NewReader(strings.NewReader(wire), DefaultLimits()).ReadFrame()
}

func TestReadFrame(t *testing.T) {
	tests := []struct {
		name string
		wire string
		want *Frame
	}{
		{"no headers, no body", "DISCONNECT\n\n\x00", &Frame{Command: "DISCONNECT"}},
		{"CRLF line ends", "SEND\r\ndestination:/topic/a\r\n\r\nhi\x00",
			&Frame{Command: "SEND", Headers: []Header{{"destination", "/topic/a"}}, Body: []byte("hi")}},
		{"heart-beats before the frame", "\n\r\n\nRECEIPT\nreceipt-id:7\n\n\x00",
			&Frame{Command: "RECEIPT", Headers: []Header{{"receipt-id", "7"}}}},
		{"content-length body holds NUL", "MESSAGE\ncontent-length:3\n\na\x00b\x00",
			&Frame{Command: "MESSAGE", Headers: []Header{{"content-length", "3"}}, Body: []byte("a\x00b")}},
		{"escapes decoded", "MESSAGE\nk\\cey:a\\nb\\rc\\\\d\\ce\n\n\x00",
			&Frame{Command: "MESSAGE", Headers: []Header{{"k:ey", "a\nb\rc\\d:e"}}}},
		{"CONNECTED is not unescaped", "CONNECTED\nserver:a\\cb\n\n\x00",
			&Frame{Command: "CONNECTED", Headers: []Header{{"server", `a\cb`}}}},
		{"raw colon in a value is kept", "MESSAGE\nmessage-id:ID:host-1\n\n\x00",
			&Frame{Command: "MESSAGE", Headers: []Header{{"message-id", "ID:host-1"}}}},
		{"repeated headers kept in order", "MESSAGE\nfoo:1\nfoo:2\n\n\x00",
			&Frame{Command: "MESSAGE", Headers: []Header{{"foo", "1"}, {"foo", "2"}}}},
		{"empty value", "MESSAGE\nselector:\n\n\x00",
			&Frame{Command: "MESSAGE", Headers: []Header{{"selector", ""}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := read(t, tt.wire)
			require.NoError(t, err)
			assert.Equal(t, tt.want, f)
		})
	}
}

func TestReadFrameFirstHeaderWins(t *testing.T) {
	// STOMP 1.2 "Repeated Header Entries": only the first value is used,
	// also for content-length.
	f, err := read(t, "MESSAGE\nfoo:1\nfoo:2\ncontent-length:1\ncontent-length:5\n\nx\x00")
	require.NoError(t, err)
	v, ok := f.Get("foo")
	assert.True(t, ok)
	assert.Equal(t, "1", v)
	assert.Equal(t, []byte("x"), f.Body)
	_, ok = f.Get("bar")
	assert.False(t, ok)
}

func TestReadFrameErrors(t *testing.T) {
	small := Limits{MaxLine: 16, MaxHeaders: 2, MaxBody: 4}
	tests := []struct {
		name string
		wire string
		lim  Limits
		want string
		is   error
	}{
		{"eof inside headers", "SEND\ndest", DefaultLimits(), "", io.ErrUnexpectedEOF},
		{"eof inside body", "SEND\n\nabc", DefaultLimits(), "", io.ErrUnexpectedEOF},
		{"eof inside counted body", "SEND\ncontent-length:5\n\nab", DefaultLimits(), "", io.ErrUnexpectedEOF},
		{"no colon", "SEND\nnocolon\n\n\x00", DefaultLimits(), `header line "nocolon" has no colon`, nil},
		{"undefined escape", "SEND\nk:a\\tb\n\n\x00", DefaultLimits(), `undefined escape "\t"`, nil},
		{"lone backslash", "SEND\nk:a\\\n\n\x00", DefaultLimits(), `lone "\"`, nil},
		{"bad content-length", "SEND\ncontent-length:x\n\n\x00", DefaultLimits(), `content-length "x" is not a byte count`, nil},
		{"negative content-length", "SEND\ncontent-length:-1\n\n\x00", DefaultLimits(), `content-length "-1"`, nil},
		{"no NUL after counted body", "SEND\ncontent-length:1\n\nab", DefaultLimits(), "no NUL after the 1 body bytes", nil},
		{"long line", "SEND\n" + strings.Repeat("k", 40) + ":v\n\n\x00", small, "", ErrLimit},
		{"many headers", "SEND\na:1\nb:2\nc:3\n\n\x00", small, "", ErrLimit},
		{"long counted body", "SEND\ncontent-length:9\n\n123456789\x00", small, "", ErrLimit},
		{"long body", "SEND\n\n123456789\x00", small, "", ErrLimit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewReader(strings.NewReader(tt.wire), tt.lim).ReadFrame()
			require.Error(t, err)
			if tt.is != nil {
				assert.ErrorIs(t, err, tt.is)
			}
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	_, err := read(t, "\n\n")
	assert.Equal(t, io.EOF, err, "a stream may end between frames")
}

func TestAppendFrame(t *testing.T) {
	b, err := AppendFrame(nil, &Frame{Command: "SEND", Headers: []Header{{"a:b", "x\ny\\z\r"}}, Body: []byte("hi")})
	require.NoError(t, err)
	assert.Equal(t, "SEND\na\\cb:x\\ny\\\\z\\r\n\nhi\x00", string(b))

	b, err = AppendFrame(nil, &Frame{Command: "CONNECT", Headers: []Header{{"login", `a\b:c`}}})
	require.NoError(t, err)
	assert.Equal(t, "CONNECT\nlogin:a\\b:c\n\n\x00", string(b), "CONNECT headers are sent as they are")

	bad := []struct {
		name string
		f    *Frame
		want string
	}{
		{"empty command", &Frame{}, "not one non-empty line"},
		{"two-line command", &Frame{Command: "SEND\nX"}, "not one non-empty line"},
		{"CONNECT header with LF", &Frame{Command: "CONNECT", Headers: []Header{{"host", "a\nb"}}}, "cannot be sent unescaped"},
		{"CONNECT name with colon", &Frame{Command: "CONNECT", Headers: []Header{{"a:b", "c"}}}, "cannot be sent unescaped"},
		{"wrong content-length", &Frame{Command: "SEND", Headers: []Header{{"content-length", "3"}}, Body: []byte("ab")}, `content-length "3" but 2 body bytes`},
		{"NUL without content-length", &Frame{Command: "SEND", Body: []byte("a\x00")}, "contains NUL"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := AppendFrame(nil, tt.f)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// roundTrip checks that f survives encoding and decoding.
func roundTrip(t testing.TB, f *Frame) {
	b, err := AppendFrame(nil, f)
	if err != nil {
		return // not every frame can be encoded; AppendFrame says why
	}
	g, err := NewReader(bytes.NewReader(b), DefaultLimits()).ReadFrame()
	require.NoError(t, err, "re-reading %q", b)
	require.Equal(t, f.Command, g.Command)
	require.Equal(t, len(f.Headers), len(g.Headers))
	for i := range f.Headers {
		require.Equal(t, f.Headers[i], g.Headers[i])
	}
	require.Equal(t, string(f.Body), string(g.Body))
}

func TestRoundTripSeeded(t *testing.T) {
	alphabet := []string{"a", ":", "\\", "\n", "\r", "\x00", "é", "c", " "}
	pick := func(seed, n int) string {
		var sb strings.Builder
		for i := range n {
			sb.WriteString(alphabet[(seed*31+i*17+i*i)%len(alphabet)])
		}
		return sb.String()
	}
	for seed := range 500 {
		f := &Frame{Command: []string{"SEND", "MESSAGE", "CONNECT", "ERROR"}[seed%4]}
		for h := range seed % 4 {
			f.Headers = append(f.Headers, Header{Key: "k" + pick(seed+h, 1+h), Value: pick(seed*7+h, seed%9)})
		}
		f.Body = []byte(pick(seed*13, seed%11))
		if seed%2 == 0 {
			f.Headers = append(f.Headers, Header{"content-length", strconv.Itoa(len(f.Body))})
		}
		roundTrip(t, f)
	}
}

func FuzzReadFrame(f *testing.F) {
	for _, s := range []string{
		"SEND\ndestination:/topic/a\ncontent-length:2\n\nhi\x00",
		"MESSAGE\nk\\cey:a\\nb\n\n\x00\n\n",
		"CONNECTED\nversion:1.2\nserver:x\\y\n\n\x00",
		"\r\nRECEIPT\r\nreceipt-id:1\r\n\r\n\x00",
		"ERROR\nmessage:bad\n\nsome text\x00",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bytes.NewReader(data), Limits{MaxLine: 1 << 10, MaxHeaders: 32, MaxBody: 1 << 12})
		for range 8 {
			fr, err := r.ReadFrame()
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && err.Error() == "" {
					t.Fatal("an error must say what was wrong")
				}
				return
			}
			roundTrip(t, fr)
		}
	})
}

func BenchmarkReadFrame(b *testing.B) {
	wire, err := AppendFrame(nil, &Frame{Command: "MESSAGE", Headers: []Header{
		{"destination", "/topic/drip"}, {"subscription", "12"}, {"message-id", "ID:host-1:1:1:1:42"},
		{"content-length", "28"}, {"a001", "market"}, {"a042", "17"},
	}, Body: make([]byte, 28)})
	require.NoError(b, err)
	stream := bytes.Repeat(wire, 1024)
	b.ReportAllocs()
	b.SetBytes(int64(len(wire)))
	var r *Reader
	for i := 0; b.Loop(); i++ {
		if i%1024 == 0 {
			r = NewReader(bytes.NewReader(stream), DefaultLimits())
		}
		if _, err := r.ReadFrame(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendFrame(b *testing.B) {
	f := &Frame{Command: "SEND", Headers: []Header{
		{"destination", "/topic/drip"}, {"content-length", "28"}, {"a001", "market"}, {"a042", "17"},
	}, Body: make([]byte, 28)}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = AppendFrame(buf[:0], f); err != nil {
			b.Fatal(err)
		}
	}
}
