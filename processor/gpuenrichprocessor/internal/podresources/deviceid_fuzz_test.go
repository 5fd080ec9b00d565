package podresources

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParseDeviceID: any string the kubelet hands out either parses into a GPU or MIG id
// of one scheme — a UUID that is the input's prefix, or non-negative numbers — or is
// rejected with ErrInvalidDeviceID; never a panic.
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
		switch id.Scheme {
		case SchemeUUID:
			if !strings.HasPrefix(s, id.UUID) || id.UUID == "" || id.GPU != -1 || id.MIG != -1 {
				t.Fatalf("%q: UUID %q is not its prefix, or numbers set: %+v", s, id.UUID, id)
			}
		case SchemeIndex, SchemeGKE:
			if id.UUID != "" || id.GPU < 0 || (id.Kind == KindMIG) != (id.MIG >= 0) {
				t.Fatalf("%q: inconsistent %+v", s, id)
			}
		default:
			t.Fatalf("%q: scheme %d", s, id.Scheme)
		}
		if id.Replica < -1 {
			t.Fatalf("%q: replica %d", s, id.Replica)
		}
	})
}
