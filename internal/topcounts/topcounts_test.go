package topcounts

import "testing"

func TestFormat(t *testing.T) {
	counts := map[string]int64{"10.0.0.2": 3, "10.0.0.1": 3, "10.0.0.3": 7, "other": 1}
	if got, want := Format(counts, 3), "10.0.0.3=7, 10.0.0.1=3, 10.0.0.2=3"; got != want {
		t.Errorf("Format = %q, want %q", got, want)
	}
	if got := Format(map[string]int{}, 5); got != "" {
		t.Errorf("no counts: %q, want empty", got)
	}
}
