package podresources

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParseDeviceID: any string the kubelet hands out either parses into a GPU or MIG id
// that round-trips to its UUID prefix, or is rejected with ErrInvalidDeviceID; never a panic.
func FuzzParseDeviceID(f *testing.F) {
	// Seeds live in testdata/fuzz/FuzzParseDeviceID (one device id per file).
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseDeviceID(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidDeviceID) {
				t.Fatalf("%q: error %v does not wrap ErrInvalidDeviceID", s, err)
			}
			return
		}
		if id.Kind != KindGPU && id.Kind != KindMIG {
			t.Fatalf("%q: kind %q", s, id.Kind)
		}
		if !strings.HasPrefix(s, id.UUID) || id.UUID == "" {
			t.Fatalf("%q: UUID %q is not its prefix", s, id.UUID)
		}
	})
}
