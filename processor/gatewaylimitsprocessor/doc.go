// Package gatewaylimitsprocessor is the `gateway_limits` processor, for the gateway tier:
// it holds every authenticated client (a node's agent) to what an agent produces — the
// metric names of our contract, a budget of new and live series, points per second,
// buckets per histogram point, name and attribute-key lengths — so that one token cannot
// fill Prometheus with series. What it refuses is counted per client
// (otelcol_gateway_limited_points) and logged, rate-limited. Nothing upstream limits
// series per authenticated client; README.md says more.
package gatewaylimitsprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/gatewaylimitsprocessor"
