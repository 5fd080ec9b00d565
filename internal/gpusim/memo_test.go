package gpusim

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMemoAnswersWhatTheScenarioAnswers: every scenario, asked through the memo in the
// order a collection asks (the same instant several times, whole seconds again after their
// slot was reused, instants between seconds, concurrently as the XID watcher does),
// answers what the scenario computes at that instant; so does a machine other than the
// one the memo keeps readings for (another seed), which it must not answer from them.
func TestMemoAnswersWhatTheScenarioAnswers(t *testing.T) {
	sys, err := lookupSystem("dgxh100")
	require.NoError(t, err)
	m := &machine{sys: sys, seed: 7}
	other := &machine{sys: sys, seed: 8}
	const gpus = 8
	instants := []float64{0, 0, 0.25, 0.25, 1, 1.5, 1, memoSeconds + 1, 1, 2 * memoSeconds, 0, 37.123, 37.124, 37.123, 600}
	for _, name := range Scenarios() {
		compute, err := lookupScenario(name)
		require.NoError(t, err)
		memo := newScenarioMemo(compute, m, gpus)
		var wg sync.WaitGroup
		for g := range gpus + 1 { // one index past the GPUs: computed, not kept
			wg.Add(1)
			go func() {
				defer wg.Done()
				for round := range 3 {
					for _, at := range instants {
						assert.Equal(t, compute(m, g, at), memo.reading(m, g, at), "%s GPU %d at %v s, round %d", name, g, at, round)
						assert.Equal(t, compute(other, g, at), memo.reading(other, g, at), "%s GPU %d at %v s, other seed", name, g, at)
					}
				}
			}()
		}
		wg.Wait()
	}
}
