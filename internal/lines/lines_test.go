package lines

import (
	"reflect"
	"strings"
	"testing"
)

func TestWriter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		max    int
		writes []string
		want   []string
	}{
		{"whole lines", 0, []string{"a\nb\n"}, []string{"a", "b"}},
		{"split writes", 0, []string{"he", "llo\nwor", "ld\n"}, []string{"hello", "world"}},
		{"unterminated tail on flush", 0, []string{"a\nrest"}, []string{"a", "rest"}},
		{"empty lines", 0, []string{"\n\nx\n"}, []string{"", "", "x"}},
		{"no limit", 0, []string{strings.Repeat("x", 10) + "\n"}, []string{strings.Repeat("x", 10)}},
		{"long line split at max", 4, []string{"abcdefghij\n"}, []string{"abcd", "efgh", "ij"}},
		{"long tail split before newline", 4, []string{"abcdef"}, []string{"abcd", "ef"}},
		{"exactly max", 4, []string{"abcd\n"}, []string{"abcd"}},
		{"max then newline", 4, []string{"abcde\nf\n"}, []string{"abcd", "e", "f"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			w := &Writer{Max: tc.max, Emit: func(l []byte) { got = append(got, string(l)) }}
			for _, s := range tc.writes {
				if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", s, n, err)
				}
			}
			w.Flush()
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("lines = %q, want %q", got, tc.want)
			}
		})
	}
}
