package podresources

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParseDeviceID: any string the kubelet hands out either parses into a GPU or MIG id
// that round-trips to its UUID prefix, or is rejected with ErrInvalidDeviceID; never a panic.
func FuzzParseDeviceID(f *testing.F) {
	for _, seed := range []string{
		"GPU-4f1c1a9e-0000-4000-8000-000000000000",
		"GPU-4f1c1a9e-0000-4000-8000-000000000000::3",
		"MIG-9b3c2d1e-1111-4222-8333-444455556666",
		"MIG-GPU-4f1c1a9e-0000-4000-8000-000000000000/1/0",
		"GPU-", "GPU-x::-1", "GPU-x::", "::1", "", "0", "nvidia0", "GPU-\x00",
	} {
		f.Add(seed)
	}
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
