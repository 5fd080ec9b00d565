package pidns

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestInHost(t *testing.T) {
	for link, want := range map[string]bool{
		"pid:[4026531836]": true,  // the initial namespace, on every kernel
		"pid:[4026532451]": false, // a container's (hostPID: false)
	} {
		got, err := InHost(func(string) (string, error) { return link, nil }, "/proc")
		require.NoError(t, err)
		assert.Equal(t, want, got, link)
	}
	_, err := InHost(func(string) (string, error) { return "", errors.New("permission denied") }, "/proc")
	assert.ErrorContains(t, err, "PID namespace")
}

func TestInHostReadsThisProcess(t *testing.T) {
	// Whatever this machine is, the real link must be readable and give an answer.
	_, err := InHost(nil, "/proc")
	require.NoError(t, err)
}
