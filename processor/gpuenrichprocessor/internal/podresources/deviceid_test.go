package podresources

import (
	"strings"
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
		{in: gpu, want: DeviceID{Kind: KindGPU, UUID: gpu, GPU: -1, MIG: -1, Replica: -1}},
		{in: gpu + "::0", want: DeviceID{Kind: KindGPU, UUID: gpu, GPU: -1, MIG: -1, Replica: 0}},
		{in: gpu + "::12", want: DeviceID{Kind: KindGPU, UUID: gpu, GPU: -1, MIG: -1, Replica: 12}},
		{in: mig, want: DeviceID{Kind: KindMIG, UUID: mig, GPU: -1, MIG: -1, Replica: -1}},
		{in: mig + "::1", want: DeviceID{Kind: KindMIG, UUID: mig, GPU: -1, MIG: -1, Replica: 1}},
		{in: "MIG-" + gpu + "/1/0", want: DeviceID{Kind: KindMIG, UUID: "MIG-" + gpu + "/1/0", GPU: -1, MIG: -1, Replica: -1}},
		{in: "MIG-" + gpu + "/13/2::3", want: DeviceID{Kind: KindMIG, UUID: "MIG-" + gpu + "/13/2", GPU: -1, MIG: -1, Replica: 3}},
		{in: "", wantErr: true},
		// Upper case (some device plugins and DRA drivers), prefix included: kept as written.
		{in: strings.ToUpper(gpu), want: DeviceID{Kind: KindGPU, UUID: strings.ToUpper(gpu), GPU: -1, MIG: -1, Replica: -1}},
		{in: "gpu-" + gpu[4:] + "::2", want: DeviceID{Kind: KindGPU, UUID: "gpu-" + gpu[4:], GPU: -1, MIG: -1, Replica: 2}},
		{in: strings.ToUpper(mig), want: DeviceID{Kind: KindMIG, UUID: strings.ToUpper(mig), GPU: -1, MIG: -1, Replica: -1}},
		{in: "mig-gpu-" + gpu[4:] + "/1/0", want: DeviceID{Kind: KindMIG, UUID: "mig-gpu-" + gpu[4:] + "/1/0", GPU: -1, MIG: -1, Replica: -1}},
		// NVIDIA's device plugin with deviceIDStrategy=index
		{in: "0", want: DeviceID{Scheme: SchemeIndex, Kind: KindGPU, GPU: 0, MIG: -1, Replica: -1}},
		{in: "7::3", want: DeviceID{Scheme: SchemeIndex, Kind: KindGPU, GPU: 7, MIG: -1, Replica: 3}},
		{in: "1:2", want: DeviceID{Scheme: SchemeIndex, Kind: KindMIG, GPU: 1, MIG: 2, Replica: -1}},
		{in: "1:2::0", want: DeviceID{Scheme: SchemeIndex, Kind: KindMIG, GPU: 1, MIG: 2, Replica: 0}},
		{in: "1:", wantErr: true},
		{in: "1:x", wantErr: true},
		{in: "1x", wantErr: true},
		// GKE's device plugin
		{in: "nvidia0", want: DeviceID{Scheme: SchemeGKE, Kind: KindGPU, GPU: 0, MIG: -1, Replica: -1}},
		{in: "nvidia3/vgpu5", want: DeviceID{Scheme: SchemeGKE, Kind: KindGPU, GPU: 3, MIG: -1, Replica: 5}},
		{in: "nvidia1/gi7", want: DeviceID{Scheme: SchemeGKE, Kind: KindMIG, GPU: 1, MIG: 7, Replica: -1}},
		{in: "nvidia", wantErr: true},
		{in: "nvidiactl", wantErr: true},
		{in: "nvidia0/", wantErr: true},
		{in: "nvidia0/gi", wantErr: true},
		{in: "nvidia0/vgpu1/gi2", wantErr: true},
		{in: "nvidia0/foo", wantErr: true},
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
