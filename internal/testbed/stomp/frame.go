package stomp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Header is one header line. A frame keeps its headers in order because
// STOMP gives the first of repeated headers precedence.
type Header struct {
	Key, Value string
}

// Frame is one STOMP frame.
type Frame struct {
	Command string
	Headers []Header
	Body    []byte
}

// Get returns the value of the first header named key.
func (f *Frame) Get(key string) (string, bool) {
	for _, h := range f.Headers {
		if h.Key == key {
			return h.Value, true
		}
	}
	return "", false
}

// Client and server commands of STOMP 1.2.
const (
	CmdConnect     = "CONNECT"
	CmdStomp       = "STOMP"
	CmdConnected   = "CONNECTED"
	CmdSend        = "SEND"
	CmdSubscribe   = "SUBSCRIBE"
	CmdUnsubscribe = "UNSUBSCRIBE"
	CmdDisconnect  = "DISCONNECT"
	CmdMessage     = "MESSAGE"
	CmdReceipt     = "RECEIPT"
	CmdError       = "ERROR"
)

// escapes reports whether headers of frames with this command are escaped:
// all but CONNECT and CONNECTED (STOMP 1.2, "Value Encoding"), so that
// 1.0 servers can read a CONNECT frame.
func escapes(command string) bool {
	return command != CmdConnect && command != CmdConnected
}

// Limits bound what a Reader accepts from the network.
type Limits struct {
	MaxLine    int // bytes of the command line or of one header line
	MaxHeaders int // header lines per frame
	MaxBody    int // body bytes
}

// DefaultLimits are generous for brokers and small enough that a broken
// peer cannot exhaust memory.
func DefaultLimits() Limits {
	return Limits{MaxLine: 64 << 10, MaxHeaders: 1000, MaxBody: 16 << 20}
}

// ErrLimit is wrapped by errors about frames beyond the Reader's Limits.
var ErrLimit = errors.New("stomp: frame exceeds a limit")

// Reader reads frames from a byte stream.
type Reader struct {
	r   *bufio.Reader
	lim Limits
}

// NewReader reads frames from r within l.
func NewReader(r io.Reader, l Limits) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 32<<10), lim: l}
}

// ReadFrame returns the next frame, skipping the bare end-of-lines that
// serve as heart-beats between frames. It returns io.EOF at a clean end of
// stream (between frames) and io.ErrUnexpectedEOF inside one.
func (r *Reader) ReadFrame() (*Frame, error) {
	var line []byte
	for {
		var err error
		line, err = r.line()
		if err != nil {
			return nil, err
		}
		if len(line) > 0 {
			break
		}
	}
	f := &Frame{Command: string(line)}
	esc := escapes(f.Command)
	length := -1
	for {
		line, err := r.line()
		if err != nil {
			return nil, unexpected(err)
		}
		if len(line) == 0 {
			break
		}
		if len(f.Headers) == r.lim.MaxHeaders {
			return nil, fmt.Errorf("%w: more than %d headers in a %s frame", ErrLimit, r.lim.MaxHeaders, f.Command)
		}
		k, v, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			return nil, fmt.Errorf("stomp: %s frame: header line %q has no colon", f.Command, line)
		}
		h := Header{Key: string(k), Value: string(v)}
		if esc {
			if h.Key, err = unescape(k); err != nil {
				return nil, fmt.Errorf("stomp: %s frame: header name %q: %w", f.Command, k, err)
			}
			if h.Value, err = unescape(v); err != nil {
				return nil, fmt.Errorf("stomp: %s frame: header %q: %w", f.Command, h.Key, err)
			}
		}
		if h.Key == "content-length" && length < 0 {
			n, err := strconv.Atoi(h.Value)
			if err != nil || n < 0 || h.Value[0] == '+' {
				return nil, fmt.Errorf("stomp: %s frame: content-length %q is not a byte count", f.Command, h.Value)
			}
			if n > r.lim.MaxBody {
				return nil, fmt.Errorf("%w: content-length %d above %d bytes", ErrLimit, n, r.lim.MaxBody)
			}
			length = n
		}
		f.Headers = append(f.Headers, h)
	}
	if length >= 0 {
		f.Body = make([]byte, length+1)
		if _, err := io.ReadFull(r.r, f.Body); err != nil {
			return nil, unexpected(err)
		}
		if f.Body[length] != 0 {
			return nil, fmt.Errorf("stomp: %s frame: no NUL after the %d body bytes content-length announced", f.Command, length)
		}
		f.Body = f.Body[:length]
		return f, nil
	}
	// Without content-length the body ends at the first NUL.
	var body []byte
	for {
		chunk, err := r.r.ReadSlice(0)
		if len(body)+len(chunk) > r.lim.MaxBody+1 {
			return nil, fmt.Errorf("%w: body above %d bytes", ErrLimit, r.lim.MaxBody)
		}
		body = append(body, chunk...)
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, unexpected(err)
		}
	}
	if len(body) > 1 {
		f.Body = body[:len(body)-1]
	}
	return f, nil
}

// line reads one line without its end-of-line (LF or CR LF).
func (r *Reader) line() ([]byte, error) {
	var buf []byte
	for {
		chunk, err := r.r.ReadSlice('\n')
		if len(buf)+len(chunk) > r.lim.MaxLine+2 {
			return nil, fmt.Errorf("%w: line above %d bytes", ErrLimit, r.lim.MaxLine)
		}
		if err == nil {
			if buf == nil {
				buf = chunk // valid until the next read: callers copy
			} else {
				buf = append(buf, chunk...)
			}
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if err == io.EOF && len(buf)+len(chunk) > 0 {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		buf = append(buf, chunk...)
	}
	buf = buf[:len(buf)-1]
	if n := len(buf); n > 0 && buf[n-1] == '\r' {
		buf = buf[:n-1]
	}
	return buf, nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// unescape decodes a header name or value. An escape the specification
// does not define is an error, as it requires.
func unescape(b []byte) (string, error) {
	i := bytes.IndexByte(b, '\\')
	if i < 0 {
		return string(b), nil
	}
	var sb strings.Builder
	sb.Grow(len(b))
	sb.Write(b[:i])
	for ; i < len(b); i++ {
		c := b[i]
		if c != '\\' {
			sb.WriteByte(c)
			continue
		}
		if i+1 == len(b) {
			return "", errors.New(`ends with a lone "\"`)
		}
		i++
		switch b[i] {
		case 'r':
			sb.WriteByte('\r')
		case 'n':
			sb.WriteByte('\n')
		case 'c':
			sb.WriteByte(':')
		case '\\':
			sb.WriteByte('\\')
		default:
			return "", fmt.Errorf(`undefined escape "\%c"`, b[i])
		}
	}
	return sb.String(), nil
}

func appendEscaped(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\n':
			dst = append(dst, '\\', 'n')
		case ':':
			dst = append(dst, '\\', 'c')
		case '\\':
			dst = append(dst, '\\', '\\')
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// AppendFrame appends the encoding of f to dst. It refuses what cannot be
// encoded: a command that is empty or not one line, a header of a CONNECT
// or CONNECTED frame (never escaped) containing CR, LF or a colon in its
// name, a content-length header that disagrees with the body, and a body
// containing NUL without a content-length header.
func AppendFrame(dst []byte, f *Frame) ([]byte, error) {
	if f.Command == "" || strings.ContainsAny(f.Command, "\r\n\x00") {
		return dst, fmt.Errorf("stomp: command %q is not one non-empty line", f.Command)
	}
	esc := escapes(f.Command)
	dst = append(dst, f.Command...)
	dst = append(dst, '\n')
	hasLength := false
	for _, h := range f.Headers {
		if h.Key == "content-length" && !hasLength {
			if h.Value != strconv.Itoa(len(f.Body)) {
				return dst, fmt.Errorf("stomp: %s frame: content-length %q but %d body bytes", f.Command, h.Value, len(f.Body))
			}
			hasLength = true
		}
		if esc {
			dst = appendEscaped(dst, h.Key)
			dst = append(dst, ':')
			dst = appendEscaped(dst, h.Value)
		} else {
			if strings.ContainsAny(h.Key, "\r\n:") || strings.ContainsAny(h.Value, "\r\n") {
				return dst, fmt.Errorf("stomp: %s frame: header %q cannot be sent unescaped", f.Command, h.Key)
			}
			dst = append(dst, h.Key...)
			dst = append(dst, ':')
			dst = append(dst, h.Value...)
		}
		dst = append(dst, '\n')
	}
	if !hasLength && bytes.IndexByte(f.Body, 0) >= 0 {
		return dst, fmt.Errorf("stomp: %s frame: body contains NUL but has no content-length header", f.Command)
	}
	dst = append(dst, '\n')
	dst = append(dst, f.Body...)
	return append(dst, 0), nil
}
