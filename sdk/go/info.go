package cumulo

import (
	"bytes"
	"sort"
	"strings"
)

// Pair is one key/value of request_info or response_info metadata.
type Pair struct {
	Key, Value string
}

// InfoEncode encodes pairs in the key/value encoding of PROTOCOL.md
// section 5 (key\0value\0...), keeping their order. Keys and values cannot
// contain NUL.
func InfoEncode(pairs ...Pair) ([]byte, error) {
	size := 0
	for _, p := range pairs {
		if strings.IndexByte(p.Key, 0) >= 0 || strings.IndexByte(p.Value, 0) >= 0 {
			return nil, errorf(StatusInvalidArgument, "info pair %q: keys and values cannot contain NUL", p.Key)
		}
		size += len(p.Key) + len(p.Value) + 2
	}
	out := make([]byte, 0, size)
	for _, p := range pairs {
		out = append(out, p.Key...)
		out = append(out, 0)
		out = append(out, p.Value...)
		out = append(out, 0)
	}
	return out, nil
}

// InfoEncodeMap encodes m with its keys sorted, so equal maps give equal
// bytes.
func InfoEncodeMap(m map[string]string) ([]byte, error) {
	pairs := make([]Pair, 0, len(m))
	for k, v := range m {
		pairs = append(pairs, Pair{k, v})
	}
	sort.Slice(pairs, func(i, j int) bool { return pairs[i].Key < pairs[j].Key })
	return InfoEncode(pairs...)
}

// InfoParse decodes the key/value encoding. A buffer that does not end
// with NUL or holds an odd number of fields is an *Error of status
// MALFORMED. An empty buffer is no pairs.
func InfoParse(info []byte) ([]Pair, error) {
	if len(info) == 0 {
		return nil, nil
	}
	if info[len(info)-1] != 0 {
		return nil, errorf(StatusMalformed, "info of %d bytes does not end with NUL", len(info))
	}
	fields := bytes.Split(info[:len(info)-1], []byte{0})
	if len(fields)%2 != 0 {
		return nil, errorf(StatusMalformed, "info has %d fields, a key without its value", len(fields))
	}
	pairs := make([]Pair, len(fields)/2)
	for i := range pairs {
		pairs[i] = Pair{Key: string(fields[2*i]), Value: string(fields[2*i+1])}
	}
	return pairs, nil
}

// InfoGet returns the value of the first pair with key.
func InfoGet(pairs []Pair, key string) (string, bool) {
	for _, p := range pairs {
		if p.Key == key {
			return p.Value, true
		}
	}
	return "", false
}
