package cumulo

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"unicode/utf8"
)

// encoder appends the fields of one frame body (PROTOCOL.md section 2.1).
// The first field that cannot be encoded sets err; later calls do nothing.
type encoder struct {
	buf []byte
	err error
}

func (e *encoder) u8(v uint8)   { e.buf = append(e.buf, v) }
func (e *encoder) i8(v int8)    { e.buf = append(e.buf, uint8(v)) }
func (e *encoder) u16(v uint16) { e.buf = binary.LittleEndian.AppendUint16(e.buf, v) }
func (e *encoder) u32(v uint32) { e.buf = binary.LittleEndian.AppendUint32(e.buf, v) }
func (e *encoder) u64(v uint64) { e.buf = binary.LittleEndian.AppendUint64(e.buf, v) }
func (e *encoder) tid(id TransID) {
	e.buf = append(e.buf, id[:]...)
}

func (e *encoder) str(s string) {
	switch {
	case e.err != nil:
	case len(s) > math.MaxUint16:
		e.err = errorf(StatusInvalidArgument, "string of %d bytes is longer than %d", len(s), math.MaxUint16)
	case !utf8.ValidString(s):
		e.err = errorf(StatusInvalidArgument, "string %q is not valid UTF-8", s)
	default:
		e.u16(uint16(len(s)))
		e.buf = append(e.buf, s...)
	}
}

func (e *encoder) bytes(b []byte) {
	if uint64(len(b)) > math.MaxUint32 {
		e.err = errorf(StatusTooLarge, "field of %d bytes is longer than %d", len(b), uint64(math.MaxUint32))
		return
	}
	e.u32(uint32(len(b)))
	e.buf = append(e.buf, b...)
}

// decoder reads the fields of one frame body, never past its end: the first
// missing or invalid field sets err and later reads return zero values.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) take(n uint64, what string) []byte {
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = errorf(StatusMalformed, "%s needs %d bytes, %d left", what, n, len(d.b))
		return nil
	}
	v := d.b[:n:n] // capped so that appending to a field cannot overwrite the next
	d.b = d.b[n:]
	return v
}

func (d *decoder) u8() uint8 {
	if b := d.take(1, "u8"); b != nil {
		return b[0]
	}
	return 0
}

func (d *decoder) i8() int8 { return int8(d.u8()) }

func (d *decoder) u16() uint16 {
	if b := d.take(2, "u16"); b != nil {
		return binary.LittleEndian.Uint16(b)
	}
	return 0
}

func (d *decoder) u32() uint32 {
	if b := d.take(4, "u32"); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if b := d.take(8, "u64"); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

func (d *decoder) tid() (id TransID) {
	copy(id[:], d.take(uint64(len(id)), "trans_id"))
	return id
}

func (d *decoder) str() string {
	n := d.u16()
	b := d.take(uint64(n), "str")
	if d.err == nil && !utf8.Valid(b) {
		d.err = errorf(StatusMalformed, "str of %d bytes is not valid UTF-8", n)
	}
	if d.err != nil {
		return ""
	}
	return string(b)
}

func (d *decoder) bytes() []byte {
	n := d.u32()
	return d.take(uint64(n), "bytes")
}

const headerSize = 4 // the u32 length that precedes every frame

// encodeFrame appends f, length prefix included, to dst.
func encodeFrame(dst []byte, f frame) ([]byte, error) {
	start := len(dst)
	e := encoder{buf: append(dst, 0, 0, 0, 0, byte(f.frameType()))}
	f.encodeBody(&e)
	if e.err != nil {
		return dst[:start], e.err
	}
	length := uint64(len(e.buf) - start - headerSize)
	if length > math.MaxUint32 {
		return dst[:start], errorf(StatusTooLarge, "frame of %d bytes is longer than %d", length, uint64(math.MaxUint32))
	}
	binary.LittleEndian.PutUint32(e.buf[start:], uint32(length))
	return e.buf, nil
}

// checkLength validates the length field of a frame against limit, before
// any of its body is read.
func checkLength(length, limit uint32) error {
	if length == 0 {
		return errorf(StatusMalformed, "frame length 0: a frame holds at least its type byte")
	}
	if length > limit {
		return errorf(StatusTooLarge, "frame of %d bytes is over the limit of %d", length, limit)
	}
	return nil
}

// decodeBody decodes the type byte and body of a frame; the body must be
// consumed exactly.
func decodeBody(typ byte, body []byte) (frame, error) {
	f := newFrame(frameType(typ))
	if f == nil {
		return nil, errorf(StatusMalformed, "unknown frame type 0x%02x", typ)
	}
	d := decoder{b: body}
	f.decodeBody(&d)
	if d.err != nil {
		return nil, fmt.Errorf("%v: %w", f.frameType(), d.err)
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%v: %w", f.frameType(), errorf(StatusMalformed, "%d trailing bytes", len(d.b)))
	}
	return f, nil
}

// decodeFrame decodes buf, which must hold exactly one whole frame.
func decodeFrame(buf []byte, limit uint32) (frame, error) {
	if len(buf) < headerSize {
		return nil, errorf(StatusMalformed, "%d bytes cannot hold a frame length", len(buf))
	}
	length := binary.LittleEndian.Uint32(buf)
	if err := checkLength(length, limit); err != nil {
		return nil, err
	}
	if rest := uint64(len(buf) - headerSize); rest != uint64(length) {
		return nil, errorf(StatusMalformed, "frame length %d but %d bytes follow", length, rest)
	}
	return decodeBody(buf[headerSize], buf[headerSize+1:])
}

// readFrame reads the next frame from r. A length over limit is refused
// before its body is read. Errors of the stream itself are returned as they
// are; invalid frames give an *Error (MALFORMED or TOO_LARGE), possibly
// wrapped.
func readFrame(r *bufio.Reader, limit uint32) (frame, error) {
	var header [headerSize]byte
	if _, err := io.ReadFull(r, header[:]); err != nil {
		return nil, err
	}
	length := binary.LittleEndian.Uint32(header[:])
	if err := checkLength(length, limit); err != nil {
		return nil, err
	}
	body := make([]byte, length)
	if _, err := io.ReadFull(r, body); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return decodeBody(body[0], body[1:])
}
