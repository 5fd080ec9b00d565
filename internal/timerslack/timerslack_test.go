package timerslack

import (
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  time.Duration
	}{
		{"", Default},
		{"off", 0},
		{"0", 0},
		{"0s", 0},
		{"1ms", time.Millisecond},
		{" 500us ", 500 * time.Microsecond},
		{"100ms", Max},
	} {
		got, err := Parse(tc.value)
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %v, %v; want %v", tc.value, got, err, tc.want)
		}
	}
	for _, bad := range []string{"5", "fast", "-1ms", "101ms", "1h"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) took a value it should refuse", bad)
		}
	}
}
