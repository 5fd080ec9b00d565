package confinement

import (
	"strings"
	"testing"
)

func TestEnabled(t *testing.T) {
	for value, want := range map[string]bool{"": true, "on": true, " on ": true, "off": false} {
		got, err := Enabled(value)
		if err != nil || got != want {
			t.Errorf("Enabled(%q) = %v, %v; want %v", value, got, err, want)
		}
	}
	for _, value := range []string{"0", "false", "OFF", "yes", "maybe"} {
		_, err := Enabled(value)
		if err == nil || !strings.Contains(err.Error(), EnvVar) {
			t.Errorf("Enabled(%q): %v, want an error naming %s", value, err, EnvVar)
		}
	}
}
