package cumulo

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
)

// vectorPath locates the shared test vectors of the repository.
func vectorPath(name string) string {
	return filepath.Join("..", "..", "proto", "vectors", name)
}

func loadJSON(t testing.TB, path string, into any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading vectors: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // u64 fields exceed float64 precision
	if err := dec.Decode(into); err != nil {
		t.Fatalf("parsing %s: %v", path, err)
	}
}

type frameVectors struct {
	Family  string
	Vectors []struct {
		Name   string
		Type   string
		Hex    string
		Fields map[string]any
	}
	Invalid []struct {
		Name  string
		Hex   string
		Error string
	}
}

// The limit the TOO_LARGE vectors assume (PROTOCOL.md section 8).
const vectorLimit = 1024

func frameVectorFiles(t testing.TB) []string {
	files, err := filepath.Glob(vectorPath("*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no vector files found: %v", err)
	}
	var out []string
	for _, f := range files {
		if filepath.Base(f) != "kv.json" {
			out = append(out, f)
		}
	}
	return out
}

func TestFrameVectors(t *testing.T) {
	decoded, rejected := 0, 0
	for _, path := range frameVectorFiles(t) {
		var file frameVectors
		loadJSON(t, path, &file)
		for _, v := range file.Vectors {
			t.Run(file.Family+"/"+v.Name, func(t *testing.T) {
				checkVector(t, v.Type, mustHex(t, v.Hex), v.Fields)
			})
			decoded++
		}
		for _, v := range file.Invalid {
			t.Run(file.Family+"/invalid_"+v.Name, func(t *testing.T) {
				checkInvalid(t, mustHex(t, v.Hex), v.Error)
			})
			rejected++
		}
	}
	if decoded == 0 || rejected == 0 {
		t.Fatalf("found %d vectors and %d invalid ones", decoded, rejected)
	}
	t.Logf("%d vectors round-tripped, %d invalid ones rejected", decoded, rejected)
}

func checkVector(t *testing.T, typeName string, raw []byte, fields map[string]any) {
	want := frameFromFields(t, typeName, fields)
	got, err := decodeFrame(raw, vectorLimit)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if got.frameType().String() != typeName {
		t.Fatalf("decoded a %v, want %s", got.frameType(), typeName)
	}
	if g, w := fieldsOf(got), fieldsOf(want); !reflect.DeepEqual(g, w) {
		t.Errorf("decoded fields\n got %v\nwant %v", g, w)
	}
	encoded, err := encodeFrame(nil, want)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	if !bytes.Equal(encoded, raw) {
		t.Errorf("encoded\n got %x\nwant %x", encoded, raw)
	}
	// The stream reader must agree with the buffer decoder.
	streamed, err := readFrame(bufio.NewReader(bytes.NewReader(raw)), vectorLimit)
	if err != nil || !reflect.DeepEqual(fieldsOf(streamed), fieldsOf(got)) {
		t.Errorf("readFrame gave %v, %v", streamed, err)
	}
}

func checkInvalid(t *testing.T, raw []byte, wantStatus string) {
	_, err := decodeFrame(raw, vectorLimit)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("decode gave %v, want an *Error %s", err, wantStatus)
	}
	if e.Status.String() != wantStatus {
		t.Errorf("decode gave %v, want %s", err, wantStatus)
	}
	if _, err := readFrame(bufio.NewReader(bytes.NewReader(raw)), vectorLimit); err == nil {
		t.Error("readFrame accepted it")
	}
}

// frameTypeByName maps the vector "type" strings to frame types.
func frameTypeByName(t testing.TB, name string) frameType {
	for typ, n := range frameTypeNames {
		if n == name {
			return typ
		}
	}
	t.Fatalf("unknown frame type %q", name)
	return 0
}

// frameFromFields builds a frame from vector fields through the proto tags,
// requiring every tagged field to be given and no other.
func frameFromFields(t testing.TB, typeName string, fields map[string]any) frame {
	t.Helper()
	f := newFrame(frameTypeByName(t, typeName))
	v := reflect.ValueOf(f).Elem()
	used := 0
	for i := 0; i < v.NumField(); i++ {
		tag := v.Type().Field(i).Tag.Get("proto")
		if tag == "" {
			continue
		}
		raw, ok := fields[tag]
		if !ok {
			t.Fatalf("vector lacks field %q", tag)
		}
		used++
		if err := setField(v.Field(i), raw); err != nil {
			t.Fatalf("field %s: %v", tag, err)
		}
	}
	if used != len(fields) {
		t.Fatalf("vector has %d fields, %s has %d", len(fields), typeName, used)
	}
	return f
}

func setField(field reflect.Value, raw any) error {
	switch field.Interface().(type) {
	case TransID:
		id, err := ParseTransID(raw.(string))
		field.Set(reflect.ValueOf(id))
		return err
	case []TransID:
		ids := []TransID{}
		for _, s := range raw.([]any) {
			id, err := ParseTransID(s.(string))
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
		field.Set(reflect.ValueOf(ids))
	case []byte:
		b, err := hex.DecodeString(raw.(string))
		field.SetBytes(b)
		return err
	case string:
		field.SetString(raw.(string))
	case int8:
		n, err := strconv.ParseInt(string(raw.(json.Number)), 10, 8)
		field.SetInt(n)
		return err
	default: // unsigned integers and Status
		n, err := strconv.ParseUint(string(raw.(json.Number)), 10, field.Type().Bits())
		field.SetUint(n)
		return err
	}
	return nil
}

// fieldsOf renders every tagged field of f as text, so that nil and empty
// byte slices compare equal.
func fieldsOf(f frame) map[string]string {
	out := map[string]string{"type": f.frameType().String()}
	v := reflect.ValueOf(f).Elem()
	for i := 0; i < v.NumField(); i++ {
		if tag := v.Type().Field(i).Tag.Get("proto"); tag != "" {
			switch x := v.Field(i).Interface().(type) {
			case []byte:
				out[tag] = hex.EncodeToString(x)
			case Status:
				out[tag] = strconv.Itoa(int(x))
			default:
				out[tag] = fmt.Sprint(x)
			}
		}
	}
	return out
}

func TestEncodeRefusesBadStrings(t *testing.T) {
	long := string(make([]byte, 1<<16))
	for _, name := range []string{long, "\xff\xfe"} {
		_, err := encodeFrame(nil, &sendFrame{kind: frameSendAsync, Name: name})
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("encoding a name of %d bytes gave %v", len(name), err)
		}
	}
}

func TestReadFrameRefusesOversizedWithoutReadingBody(t *testing.T) {
	// Only the header is there: the reader must not wait for the body.
	r := bufio.NewReader(bytes.NewReader([]byte{0x01, 0x00, 0x10, 0x00}))
	if _, err := readFrame(r, 1024); !errors.Is(err, ErrTooLarge) {
		t.Errorf("readFrame gave %v, want TOO_LARGE", err)
	}
}

func TestReadFrameTruncatedBody(t *testing.T) {
	r := bufio.NewReader(bytes.NewReader([]byte{0x09, 0, 0, 0, 0x30, 1, 2}))
	if _, err := readFrame(r, 1024); err == nil {
		t.Error("readFrame accepted a truncated body")
	}
}

// FuzzDecodeFrame checks that any input either decodes to a frame that
// re-encodes to the same bytes, or is refused with an *Error; and that the
// stream reader agrees. Its seeds are every vector, valid and invalid.
func FuzzDecodeFrame(f *testing.F) {
	for _, path := range frameVectorFiles(f) {
		var file frameVectors
		loadJSON(f, path, &file)
		for _, v := range file.Vectors {
			f.Add(mustHex(f, v.Hex))
		}
		for _, v := range file.Invalid {
			f.Add(mustHex(f, v.Hex))
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := decodeFrame(raw, 1<<16)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || (e.Status != StatusMalformed && e.Status != StatusTooLarge) {
				t.Fatalf("decode gave %v, want MALFORMED or TOO_LARGE", err)
			}
			return
		}
		again, err := encodeFrame(nil, got)
		if err != nil || !bytes.Equal(again, raw) {
			t.Fatalf("re-encoding %x gave %x, %v", raw, again, err)
		}
		streamed, err := readFrame(bufio.NewReader(bytes.NewReader(raw)), 1<<16)
		if err != nil || !reflect.DeepEqual(fieldsOf(streamed), fieldsOf(got)) {
			t.Fatalf("readFrame disagrees: %v, %v", streamed, err)
		}
	})
}
