// Package topcounts writes the largest counts of a map as one log field, for the
// rate-limited summary lines of auth_audit and gateway_limits.
package topcounts // import "github.com/otelcol-gpu/otelcol-gpu/internal/topcounts"

import (
	"fmt"
	"sort"
	"strings"
)

// Format writes the n largest counts as "key=count, …", largest first (ties by key).
func Format[N int | int64](counts map[string]N, n int) string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if counts[keys[i]] != counts[keys[j]] {
			return counts[keys[i]] > counts[keys[j]]
		}
		return keys[i] < keys[j]
	})
	if len(keys) > n {
		keys = keys[:n]
	}
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, counts[k])
	}
	return strings.Join(parts, ", ")
}
