package podnames

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLookupFromTheKubeletLogDirectory(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	x := New(filepath.Join("testdata", "pods"), time.Minute, func() time.Time { return now })
	p, ok := x.Lookup("3f1c2d4e-5b6a-4c7d-8e9f-0a1b2c3d4e5f")
	require.True(t, ok)
	assert.Equal(t, "ml", p.Namespace)
	assert.Equal(t, "train-0", p.Name)
	assert.ElementsMatch(t, []string{"pytorch", "sidecar"}, p.Containers)
	p, ok = x.Lookup("0a1b2c3d-0000-4000-8000-000000000001")
	require.True(t, ok)
	assert.Equal(t, "coredns-7db6d8ff4d-abcde", p.Name)
	_, ok = x.Lookup("ffffffff-0000-4000-8000-000000000000")
	assert.False(t, ok)
}

func TestNewPodIsFoundOnAMissAndMissingDirIsHarmless(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	x := New(dir, time.Hour, func() time.Time { return now })
	_, ok := x.Lookup("11111111-2222-3333-4444-555555555555")
	assert.False(t, ok)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "default_job_11111111-2222-3333-4444-555555555555", "main"), 0o755))
	now = now.Add(2 * time.Second)
	p, ok := x.Lookup("11111111-2222-3333-4444-555555555555")
	require.True(t, ok)
	assert.Equal(t, "job", p.Name)

	missing := New(filepath.Join(dir, "nope"), time.Minute, func() time.Time { return now })
	_, ok = missing.Lookup("11111111-2222-3333-4444-555555555555")
	assert.False(t, ok)
}

func TestContainerNameIsNeverGuessedAmongSeveral(t *testing.T) {
	one := Pod{Containers: []string{"trainer"}}
	assert.Equal(t, "trainer", one.ContainerName("abc"), "a pod with one container")
	two := Pod{Containers: []string{"trainer", "sidecar"}}
	assert.Empty(t, two.ContainerName("abc"), "which of the two is not known")
	known := Pod{Containers: []string{"trainer", "sidecar"}, ContainerIDs: map[string]string{"abc": "sidecar"}}
	assert.Equal(t, "sidecar", known.ContainerName("abc"))
	assert.Empty(t, known.ContainerName(""), "no container ID (a pod-level process)")
	assert.Empty(t, one.ContainerName(""), "in the pod but in no container, even with one container")
}

func TestUIDByName(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, d := range []string{"ml_train-0_11111111-0000-4000-8000-000000000001", "ml_ranks-0_22222222-0000-4000-8000-000000000002", "ml_ranks-0_33333333-0000-4000-8000-000000000003"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, d, "main"), 0o755))
	}
	x := New(dir, time.Minute, func() time.Time { return now })
	uid, ok := x.UID("ml", "train-0")
	require.True(t, ok)
	assert.Equal(t, "11111111-0000-4000-8000-000000000001", uid)
	_, ok = x.UID("ml", "ranks-0")
	assert.False(t, ok, "a recreated pod's two directories: not known which")
	_, ok = x.UID("ml", "nope")
	assert.False(t, ok)
}
