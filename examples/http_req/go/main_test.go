package main

import "testing"

func TestAnswer(t *testing.T) {
	const missing = "<http_test><error>no value specified</error></http_test>"
	cases := []struct {
		name, request, want string
	}{
		{"integer", "value\x0042\x00", "<http_test><value>42</value></http_test>"},
		{"plus and zeros", "value\x00+007\x00", "<http_test><value>7</value></http_test>"},
		{"negative", "value\x00-3\x00", "<http_test><value>-3</value></http_test>"},
		{"int64 min", "value\x00-9223372036854775808\x00", "<http_test><value>-9223372036854775808</value></http_test>"},
		{"first of repeated keys", "other\x00x\x00value\x001\x00value\x002\x00", "<http_test><value>1</value></http_test>"},
		{"over 64 bits", "value\x009223372036854775808\x00", missing},
		{"not a number", "value\x00abc\x00", missing},
		{"hex", "value\x000x10\x00", missing},
		{"underscore", "value\x001_000\x00", missing},
		{"space", "value\x00 42\x00", missing},
		{"sign only", "value\x00-\x00", missing},
		{"empty value", "value\x00\x00", missing},
		{"no value key", "values\x0042\x00", missing},
		{"empty body", "", missing},
		{"malformed", "value\x0042", missing},
	}
	for _, c := range cases {
		if got := answer([]byte(c.request)); got != c.want {
			t.Errorf("%s: answer(%q) = %q, want %q", c.name, c.request, got, c.want)
		}
	}
}
