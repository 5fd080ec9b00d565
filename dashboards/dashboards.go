// Package dashboards defines otelcol-gpu's Grafana dashboards in Go and renders them to the
// JSON files committed next to this file (`go run ./dashboards/gen -out dashboards`).
//
// Every query reads raw metrics of the metric contract (no recording rules), from the
// Prometheus chosen in the `datasource` variable, and filters on cluster=~"$cluster" so the
// dashboards work with and without a cluster label. MetricNames lists every metric the
// queries use, for a contract test.
package dashboards

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/otelcol-gpu/otelcol-gpu/dashboards/internal/grafana"
	"github.com/otelcol-gpu/otelcol-gpu/dashboards/promql"
)

// Dashboard names one generated dashboard.
type Dashboard struct {
	File  string // file name, e.g. gpu-fleet-overview.json
	UID   string
	Title string
	build func() *grafana.Dashboard
}

// All returns the dashboards, in a stable order.
func All() []Dashboard {
	var out []Dashboard
	for _, build := range []func() *grafana.Dashboard{fleetOverview, nodeDetail, workloads, mig, alertsHealth} {
		d := build()
		out = append(out, Dashboard{File: d.UID + ".json", UID: d.UID, Title: d.Title, build: build})
	}
	return out
}

// JSON renders the dashboard.
func (d Dashboard) JSON() ([]byte, error) { return d.build().JSON() }

// Queries returns the dashboard's PromQL: every panel query (rows' panels included), then
// every query variable's query as PromQL (label_values(expr, label) gives expr).
func (d Dashboard) Queries() []string {
	b := d.build()
	var out []string
	var walk func(ps []*grafana.Panel)
	walk = func(ps []*grafana.Panel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				out = append(out, t.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(b.Panels())
	for _, v := range b.Variables {
		if v.Type == "query" {
			if expr, ok := VariableExpr(v.Query); ok {
				out = append(out, expr)
			}
		}
	}
	return out
}

// VariableExpr returns the PromQL inside a Prometheus template variable query:
// label_values(expr, label) and query_result(expr) give expr; label_values(label),
// label_names() and metrics(regex) have none.
func VariableExpr(q string) (string, bool) {
	q = strings.TrimSpace(q)
	for _, fn := range []string{"label_values(", "query_result("} {
		if !strings.HasPrefix(q, fn) || !strings.HasSuffix(q, ")") {
			continue
		}
		inner := q[len(fn) : len(q)-1]
		if fn == "query_result(" {
			return inner, true
		}
		// The label is after the last top-level comma; without one there is no expr.
		depth, cut := 0, -1
		inString := byte(0)
		for i := 0; i < len(inner); i++ {
			c := inner[i]
			switch {
			case inString != 0:
				if c == '\\' {
					i++
				} else if c == inString {
					inString = 0
				}
			case c == '"' || c == '\'' || c == '`':
				inString = c
			case c == '(' || c == '{' || c == '[':
				depth++
			case c == ')' || c == '}' || c == ']':
				depth--
			case c == ',' && depth == 0:
				cut = i
			}
		}
		if cut < 0 {
			return "", false
		}
		return strings.TrimSpace(inner[:cut]), true
	}
	return "", false
}

// Render renders every dashboard: file name to JSON.
func Render() (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, d := range All() {
		data, err := d.JSON()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.File, err)
		}
		out[d.File] = data
	}
	return out, nil
}

// Write renders every dashboard into dir.
func Write(dir string) error {
	files, err := Render()
	if err != nil {
		return err
	}
	for _, name := range sortedKeys(files) {
		if err := os.WriteFile(filepath.Join(dir, name), files[name], 0o644); err != nil {
			return err
		}
	}
	return nil
}

// MetricNames returns every metric name the dashboards' queries (panel queries and query
// variables) select, sorted and distinct. Besides the metric contract's names these are
// ALERTS (Prometheus's alert series) and cAdvisor's container_cpu_usage_seconds_total.
func MetricNames() ([]string, error) {
	seen := map[string]bool{}
	for _, d := range All() {
		for _, q := range d.Queries() {
			names, err := promql.MetricNames(q)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", d.File, err)
			}
			for _, n := range names {
				seen[n] = true
			}
		}
	}
	return sortedKeys(seen), nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
