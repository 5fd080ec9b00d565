// Package depcheck holds a test of what our code links: test code of the collector
// (componenttest, receivertest, processortest, …), of contrib (pdatatest, golden) and
// testify stay out of otelcol-gpu and out of every package of ours that is not test code.
package depcheck // import "github.com/otelcol-gpu/otelcol-gpu/internal/depcheck"
