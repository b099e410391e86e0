package transport

import (
	"bytes"
	"compress/flate"
	"errors"
	"fmt"
	"io"
)

// CompressionDeflate is the frame compression a broker lists in its Open
// when it accepts compressed frames (see drip.v1.Frame).
const CompressionDeflate = "deflate"

// MaxInflatedFrame bounds what one compressed frame may inflate to: the
// size gRPC accepts for a plain frame, so compression never lets a peer
// make a broker hold more than it could without.
const MaxInflatedFrame = 4 << 20

// FrameCompressor compresses the frames of one link direction into one
// DEFLATE stream, sync-flushed after each frame, so that every frame is
// compressed against everything sent before it: bundles of small messages
// repeat attribute names and values, and even a frame of one bundle
// shrinks by about 3× on the seed's workload. Not safe for concurrent use:
// the link's single writer owns it.
type FrameCompressor struct {
	w   *flate.Writer
	out bytes.Buffer
}

// NewFrameCompressor returns a compressor at a compress/flate level.
func NewFrameCompressor(level int) (*FrameCompressor, error) {
	c := &FrameCompressor{}
	w, err := flate.NewWriter(&c.out, level)
	if err != nil {
		return nil, fmt.Errorf("frame compression: %w", err)
	}
	c.w = w
	return c, nil
}

// Compress returns the wire form of the frame that carries frame, a
// frame's wire form, compressed. It must hold only control messages and
// bundles. After an error the stream is broken and the link must end.
func (c *FrameCompressor) Compress(frame []byte) ([]byte, error) {
	c.out.Reset()
	if _, err := c.w.Write(frame); err != nil {
		return nil, fmt.Errorf("frame compression: %w", err)
	}
	if err := c.w.Flush(); err != nil {
		return nil, fmt.Errorf("frame compression: %w", err)
	}
	// The frame is sent after Compress returns, and c.out is reused.
	return AppendCompressedFrame(make([]byte, 0, c.out.Len()+16), c.out.Bytes(), len(frame)), nil
}

// FrameDecompressor inflates the compressed frames of one link direction,
// in the order they were sent. Not safe for concurrent use: the link's
// single reader owns it.
type FrameDecompressor struct {
	src    chunkSource
	r      io.ReadCloser
	limit  int
	parsed ParsedFrame
	broken error
}

// NewFrameDecompressor returns a decompressor that refuses frames
// inflating to more than limit bytes (MaxInflatedFrame when limit ≤ 0).
func NewFrameDecompressor(limit int) *FrameDecompressor {
	if limit <= 0 {
		limit = MaxInflatedFrame
	}
	d := &FrameDecompressor{limit: limit}
	d.r = flate.NewReader(&d.src)
	return d
}

// Decompress returns the wire form of the frame a compressed frame
// carries, or frame itself when it is not compressed. An error means the
// peer sent a corrupt or oversized frame; the stream cannot continue and
// the link must end.
func (d *FrameDecompressor) Decompress(frame []byte) ([]byte, error) {
	if d.broken != nil {
		return nil, d.broken
	}
	if err := PeekFrame(frame, &d.parsed); err != nil {
		d.broken = fmt.Errorf("frame: %w", err)
		return nil, d.broken
	}
	if !d.parsed.Compressed() {
		return frame, nil
	}
	out, err := d.inflate(&d.parsed)
	if err != nil {
		d.broken = fmt.Errorf("compressed frame: %w", err)
		return nil, d.broken
	}
	return out, nil
}

func (d *FrameDecompressor) inflate(f *ParsedFrame) ([]byte, error) {
	if f.Plain() {
		return nil, errors.New("carries plain fields besides the deflated ones")
	}
	size := int(f.InflatedSize)
	if size > d.limit {
		return nil, fmt.Errorf("inflates to %d bytes, more than the limit of %d", size, d.limit)
	}
	d.src.feed(f.Deflated)
	// Owned by the caller: bundles parsed from it alias it.
	buf := make([]byte, size)
	if _, err := io.ReadFull(d.r, buf); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("deflated data ends before %d bytes", size)
		}
		return nil, err
	}
	// Deflated bytes may remain: when the frame ends exactly where the
	// 32 KiB window fills, the inflater hands its bytes out before reading
	// the end-of-block code and the sync flush (a few bytes), which it
	// reads with the next frame's bytes. More than that is a corrupt
	// stream, and would otherwise accumulate.
	if n := len(d.src.b); n > maxFlushTail {
		return nil, fmt.Errorf("%d deflated bytes left after %d inflated", n, size)
	}
	// The link parses the inflated frame in full; a walk over its tags
	// here keeps a peer from nesting frames or smuggling an Open.
	in := &d.parsed
	if err := PeekFrame(buf, in); err != nil {
		return nil, err
	}
	if in.Open || in.Compressed() {
		return nil, errors.New("inflated frame is itself an Open or compressed")
	}
	return buf, nil
}

// maxFlushTail bounds the deflated bytes a frame may leave unread: an
// end-of-block code (at most 15 bits), a stored block header padded to a
// byte, and the stored block's 4 length bytes, with room to spare.
const maxFlushTail = 16

// chunkSource hands the inflater the deflated bytes received so far; when
// they run out it reports EOF, which a well-formed stream never reaches
// while inflating a frame, because each frame ends in a sync flush.
type chunkSource struct {
	b []byte
}

func (s *chunkSource) feed(p []byte) { s.b = append(s.b, p...) }

func (s *chunkSource) Read(p []byte) (int, error) {
	if len(s.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.b)
	s.b = s.b[n:]
	return n, nil
}

func (s *chunkSource) ReadByte() (byte, error) {
	if len(s.b) == 0 {
		return 0, io.EOF
	}
	c := s.b[0]
	s.b = s.b[1:]
	return c, nil
}
