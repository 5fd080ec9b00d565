package podresources

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConfigDefaults(t *testing.T) {
	cfg := Config{}.withDefaults()
	assert.Equal(t, DefaultEndpoint, cfg.Endpoint)
	assert.Equal(t, DefaultRefreshInterval, cfg.RefreshInterval)
	assert.Equal(t, DefaultTimeout, cfg.Timeout)
	assert.Equal(t, DefaultResourceNames(), cfg.ResourceNames)
	assert.Equal(t, 16<<20, cfg.MaxMessageBytes)
	require.NoError(t, cfg.validate())
}

func TestGRPCTarget(t *testing.T) {
	tests := []struct {
		endpoint, want string
		wantErr        bool
	}{
		{endpoint: "unix:///var/lib/kubelet/pod-resources/kubelet.sock", want: "unix:///var/lib/kubelet/pod-resources/kubelet.sock"},
		{endpoint: "/var/lib/kubelet/pod-resources/kubelet.sock", want: "unix:///var/lib/kubelet/pod-resources/kubelet.sock"},
		{endpoint: "run/kubelet.sock", want: "unix:run/kubelet.sock"},
		{endpoint: "unix://relative.sock", wantErr: true},
		{endpoint: "tcp://127.0.0.1:10250", wantErr: true},
	}
	for _, tt := range tests {
		got, err := grpcTarget(tt.endpoint)
		if tt.wantErr {
			assert.Error(t, err, tt.endpoint)
			continue
		}
		require.NoError(t, err, tt.endpoint)
		assert.Equal(t, tt.want, got)
	}
}

func TestStartRejectsInvalidConfig(t *testing.T) {
	for name, cfg := range map[string]Config{
		"scheme":       {Endpoint: "tcp://127.0.0.1:10250"},
		"interval":     {RefreshInterval: -1},
		"timeout":      {Timeout: -1},
		"message size": {MaxMessageBytes: -1},
		"empty name":   {ResourceNames: []string{"nvidia.com/gpu", ""}},
		"inner star":   {ResourceNames: []string{"nvidia.com/*-gpu"}},
	} {
		t.Run(name, func(t *testing.T) {
			c := New(cfg, nil, nil)
			require.Error(t, c.Start(t.Context()))
			require.NoError(t, c.Shutdown())
		})
	}
}

func TestMatchResource(t *testing.T) {
	patterns := DefaultResourceNames()
	for name, want := range map[string]bool{
		"nvidia.com/gpu":             true,
		"nvidia.com/gpu.shared":      true,
		"nvidia.com/mig-1g.10gb":     true,
		"nvidia.com/mig-3g.40gb":     true,
		"nvidia.com/gpu-extra":       false,
		"nvidia.com/mig":             false,
		"amd.com/gpu":                false,
		"example.com/nvidia.com/gpu": false,
	} {
		assert.Equal(t, want, matchResource(patterns, name), name)
	}
	assert.True(t, matchResource([]string{"*"}, "anything"))
}
