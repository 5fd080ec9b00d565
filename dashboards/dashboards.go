// Package dashboards defines otelcol-gpu's Grafana dashboards in Go, with Grafana's
// foundation SDK, and renders them to the JSON files committed next to this file
// (`make generate`).
//
// Every query reads raw metrics of the metric contract (no recording rules), but the GPU
// cost dashboard's, which read the allocation funnel and cost recording rules and the
// prices (rules/gpu-recording.yaml, rules/gpu-prices.yaml); every query reads the
// Prometheus chosen in the `datasource` variable, and filters on cluster=~"$cluster" so the
// dashboards work with and without a cluster label. Thresholds that alerts also use come
// from internal/thresholds. MetricNames lists every metric the queries use, for a contract
// test.
package dashboards

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"

	"github.com/otelcol-gpu/otelcol-gpu/internal/promql"
)

// SchemaVersion is the dashboard JSON schema version written. The SDK writes Grafana 12's
// (42); the model we use is the same in Grafana 10.x and 11.x (39), which still run in
// many kube-prometheus-stack installations and would refuse nothing, but could not
// migrate a newer schema down.
const SchemaVersion = 39

// Dashboard names one generated dashboard.
type Dashboard struct {
	File  string // file name, e.g. gpu-fleet-overview.json
	UID   string
	Title string
	build func() *dashboard.DashboardBuilder
}

// All returns the dashboards, in a stable order.
func All() []Dashboard {
	var out []Dashboard
	for _, build := range []func() *dashboard.DashboardBuilder{fleetOverview, nodeDetail, workloads, mig, alertsHealth, cost} {
		d, err := build().Build()
		if err != nil {
			panic(fmt.Sprintf("dashboards: %v", err)) // a programming error: the tests build every dashboard
		}
		out = append(out, Dashboard{File: *d.Uid + ".json", UID: *d.Uid, Title: *d.Title, build: build})
	}
	return out
}

// Model builds the dashboard: SDK model, schema version pinned, panels numbered.
func (d Dashboard) Model() (dashboard.Dashboard, error) {
	m, err := d.build().Build()
	if err != nil {
		return m, fmt.Errorf("%s: %w", d.File, err)
	}
	m.SchemaVersion = SchemaVersion
	// The SDK places links in Grafana 12's controls menu; ours stay next to the variables,
	// where every Grafana shows them.
	for i := range m.Links {
		m.Links[i].Placement = nil
	}
	number(&m)
	return m, nil
}

// number gives every row and panel an id, in order (a collapsed row's panels follow it):
// links to a panel (viewPanel=N) stay valid from one generation to the next.
func number(m *dashboard.Dashboard) {
	id := uint32(0)
	next := func() uint32 { id++; return id }
	for _, p := range m.Panels {
		if p.Panel != nil {
			p.Panel.Id = ptr(next())
			continue
		}
		p.RowPanel.Id = next()
		for i := range p.RowPanel.Panels {
			p.RowPanel.Panels[i].Id = ptr(next())
		}
	}
}

// JSON renders the dashboard: indented, keys sorted, no HTML escaping, a final newline. The
// same dashboard always renders to the same bytes.
func (d Dashboard) JSON() ([]byte, error) {
	m, err := d.Model()
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	// Decode and encode again so that every object's keys are sorted.
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(generic); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// FullOverlay is what the description of a panel says when some of its data is off by
// default: series the receiver leaves out unless deploy/config-overlays/full.yaml turns
// them on, or the clock-event reasons gpu_enrich folds into throttle causes.
const FullOverlay = "needs the full overlay: deploy/config-overlays/full.yaml"

// Panel is one panel of a dashboard: its title, description and PromQL queries, and what
// it shows instead of some values: Texts maps a value ("0") to its text (value mappings),
// NoValue is shown where the queries return nothing.
type Panel struct {
	Title       string
	Description string
	Queries     []string
	Texts       map[string]string
	NoValue     string
}

// NeedsFullOverlay tells whether the panel says that some of its data is off by default.
func (p Panel) NeedsFullOverlay() bool {
	return strings.Contains(strings.ToLower(p.Description), FullOverlay)
}

// Panels returns the dashboard's panels in order, collapsed rows' panels included (rows
// themselves are not panels here).
func (d Dashboard) Panels() ([]Panel, error) {
	m, err := d.Model()
	if err != nil {
		return nil, err
	}
	var out []Panel
	for _, p := range m.Panels {
		panels := []dashboard.Panel{}
		if p.Panel != nil {
			panels = append(panels, *p.Panel)
		} else {
			panels = append(panels, p.RowPanel.Panels...)
		}
		for _, panel := range panels {
			p := Panel{Title: deref(panel.Title), Description: deref(panel.Description), Texts: map[string]string{}}
			if fc := panel.FieldConfig; fc != nil {
				p.NoValue = deref(fc.Defaults.NoValue)
				for _, m := range fc.Defaults.Mappings {
					if m.ValueMap == nil {
						continue
					}
					for v, r := range m.ValueMap.Options {
						p.Texts[v] = deref(r.Text)
					}
				}
			}
			out = append(out, p)
			for _, t := range panel.Targets {
				q, ok := t.(prometheus.Dataquery)
				if !ok {
					return nil, fmt.Errorf("%s: panel %q: a query that is not Prometheus's", d.File, deref(panel.Title))
				}
				out[len(out)-1].Queries = append(out[len(out)-1].Queries, q.Expr)
			}
		}
	}
	return out, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Queries returns the dashboard's PromQL: every panel query (collapsed rows' panels
// included), then every query variable's query as PromQL (label_values(expr, label) gives
// expr).
func (d Dashboard) Queries() ([]string, error) {
	panels, err := d.Panels()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range panels {
		out = append(out, p.Queries...)
	}
	m, err := d.Model()
	if err != nil {
		return nil, err
	}
	for _, v := range m.Templating.List {
		if v.Type == dashboard.VariableTypeQuery {
			if expr, ok := VariableExpr(*v.Query.String); ok {
				out = append(out, expr)
			}
		}
	}
	return out, nil
}

// labelValues is a Prometheus template variable query label_values(expr, label); the
// label is an identifier, so the expr is everything before the last comma.
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)$`)

// VariableExpr returns the PromQL inside a Prometheus template variable query:
// label_values(expr, label) and query_result(expr) give expr; label_values(label),
// label_names() and metrics(regex) have none.
func VariableExpr(q string) (string, bool) {
	q = strings.TrimSpace(q)
	if m := labelValues.FindStringSubmatch(q); m != nil {
		return strings.TrimSpace(m[1]), true
	}
	if strings.HasPrefix(q, "query_result(") && strings.HasSuffix(q, ")") {
		return q[len("query_result(") : len(q)-1], true
	}
	return "", false
}

// Render renders every dashboard: file name to JSON.
func Render() (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, d := range All() {
		data, err := d.JSON()
		if err != nil {
			return nil, err
		}
		out[d.File] = data
	}
	return out, nil
}

// MetricNames returns every metric name the dashboards' queries (panel queries and query
// variables) select, sorted and distinct. Besides the metric contract's names these are
// ALERTS (Prometheus's alert series) and cAdvisor's container_cpu_usage_seconds_total.
func MetricNames() ([]string, error) {
	var all []string
	for _, d := range All() {
		qs, err := d.Queries()
		if err != nil {
			return nil, err
		}
		for _, q := range qs {
			names, err := promql.MetricNames(q)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", d.File, err)
			}
			all = append(all, names...)
		}
	}
	slices.Sort(all)
	return slices.Compact(all), nil
}

// add places panels of width w and height h after the previous ones, on the dashboard or
// in a collapsed row; the SDK lays them out left to right and top to bottom.
func add[B interface {
	WithPanel(cog.Builder[dashboard.Panel]) B
	RecordError(string, error) B
}](b B, w, h uint32, panels ...cog.Builder[dashboard.Panel]) {
	for _, p := range panels {
		panel, err := p.Build()
		if err != nil {
			b.RecordError("panel", err)
			continue
		}
		panel.GridPos = &dashboard.GridPos{W: w, H: h}
		b.WithPanel(built[dashboard.Panel]{panel})
	}
}
