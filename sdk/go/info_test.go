package cumulo

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"testing"
)

type kvVectors struct {
	Vectors []struct {
		Name  string
		Hex   string
		Pairs [][2]string
	}
	Invalid []struct {
		Name  string
		Hex   string
		Error string
	}
}

func TestInfoVectors(t *testing.T) {
	var file kvVectors
	loadJSON(t, vectorPath("kv.json"), &file)
	if len(file.Vectors) == 0 || len(file.Invalid) == 0 {
		t.Fatal("kv.json holds no vectors")
	}
	for _, v := range file.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			raw := mustHex(t, v.Hex)
			want := make([]Pair, len(v.Pairs))
			for i, p := range v.Pairs {
				want[i] = Pair{p[0], p[1]}
			}
			got, err := InfoParse(raw)
			if err != nil {
				t.Fatalf("InfoParse: %v", err)
			}
			if len(got) != len(want) || (len(want) > 0 && !reflect.DeepEqual(got, want)) {
				t.Errorf("InfoParse = %q, want %q", got, want)
			}
			encoded, err := InfoEncode(want...)
			if err != nil || !bytes.Equal(encoded, raw) {
				t.Errorf("InfoEncode = %x, %v; want %s", encoded, err, v.Hex)
			}
		})
	}
	for _, v := range file.Invalid {
		t.Run("invalid_"+v.Name, func(t *testing.T) {
			_, err := InfoParse(mustHex(t, v.Hex))
			if !errors.Is(err, ErrMalformed) || v.Error != "MALFORMED" {
				t.Errorf("InfoParse gave %v, want %s", err, v.Error)
			}
		})
	}
}

func TestInfoEncodeRefusesNUL(t *testing.T) {
	for _, p := range []Pair{{"a\x00b", "v"}, {"k", "v\x00"}} {
		if _, err := InfoEncode(p); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("InfoEncode(%q) gave %v", p, err)
		}
	}
}

func TestInfoEncodeMapSortsKeys(t *testing.T) {
	got, err := InfoEncodeMap(map[string]string{"status": "404", "content-type": "text/plain"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "content-type\x00text/plain\x00status\x00404\x00"; string(got) != want {
		t.Errorf("InfoEncodeMap = %q, want %q", got, want)
	}
}

func TestInfoGetFirstMatch(t *testing.T) {
	pairs, err := InfoParse([]byte("a\x001\x00b\x002\x00a\x003\x00"))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := InfoGet(pairs, "a"); !ok || v != "1" {
		t.Errorf("InfoGet(a) = %q, %v", v, ok)
	}
	if _, ok := InfoGet(pairs, "c"); ok {
		t.Error("InfoGet(c) found a value")
	}
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}
