package podresources

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseDeviceID(t *testing.T) {
	const gpu = "GPU-8c3b1f5e-1d2a-4f6b-9e7c-0a1b2c3d4e5f"
	const mig = "MIG-2f7e0c4a-5b6d-5e8f-a1b2-c3d4e5f60718"
	tests := []struct {
		in      string
		want    DeviceID
		wantErr bool
	}{
		{in: gpu, want: DeviceID{Kind: KindGPU, UUID: gpu, Replica: -1}},
		{in: gpu + "::0", want: DeviceID{Kind: KindGPU, UUID: gpu, Replica: 0}},
		{in: gpu + "::12", want: DeviceID{Kind: KindGPU, UUID: gpu, Replica: 12}},
		{in: mig, want: DeviceID{Kind: KindMIG, UUID: mig, Replica: -1}},
		{in: mig + "::1", want: DeviceID{Kind: KindMIG, UUID: mig, Replica: 1}},
		{in: "MIG-" + gpu + "/1/0", want: DeviceID{Kind: KindMIG, UUID: "MIG-" + gpu + "/1/0", Replica: -1}},
		{in: "MIG-" + gpu + "/13/2::3", want: DeviceID{Kind: KindMIG, UUID: "MIG-" + gpu + "/13/2", Replica: 3}},
		{in: "", wantErr: true},
		{in: "0", wantErr: true}, // device plugin with device-id-strategy=index
		{in: "nvidia0", wantErr: true},
		{in: "junk", wantErr: true},
		{in: "GPU-", wantErr: true},
		{in: "MIG-", wantErr: true},
		{in: "GPU-::1", wantErr: true},
		{in: gpu + "::", wantErr: true},
		{in: gpu + "::-1", wantErr: true},
		{in: gpu + "::+1", wantErr: true},
		{in: gpu + "::x", wantErr: true},
		{in: gpu + "::1::2", wantErr: true},
		{in: gpu + "::99999999999999999999", wantErr: true},
		{in: "GPU-abc def", wantErr: true},
		{in: "gpu-" + gpu[4:], wantErr: true},
		{in: "MIG-" + gpu + "/1", wantErr: true},
		{in: "MIG-" + gpu + "/a/0", wantErr: true},
		{in: "MIG-" + gpu + "/1/0/2", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseDeviceID(tt.in)
			if tt.wantErr {
				require.ErrorIs(t, err, ErrInvalidDeviceID)
				assert.Contains(t, err.Error(), `"`+tt.in+`"`, "the error names the input")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
