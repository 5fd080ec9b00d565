package dashboards_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/dashboards"
	"github.com/otelcol-gpu/otelcol-gpu/internal/contract"
	"github.com/otelcol-gpu/otelcol-gpu/internal/gentest"
	"github.com/otelcol-gpu/otelcol-gpu/internal/promql"
)

// The committed dashboards and their stable uids.
var wantUIDs = map[string]string{
	"gpu-fleet-overview.json": "gpu-fleet-overview",
	"gpu-node-detail.json":    "gpu-node-detail",
	"gpu-workloads.json":      "gpu-workloads",
	"gpu-mig.json":            "gpu-mig",
	"gpu-alerts-health.json":  "gpu-alerts-health",
	"gpu-cost.json":           "gpu-cost",
}

var (
	allowedPanels    = map[string]bool{"row": true, "timeseries": true, "stat": true, "heatmap": true, "table": true, "bargauge": true, "gauge": true}
	deprecatedPanels = map[string]bool{"graph": true, "singlestat": true, "table-old": true, "grafana-singlestat-panel": true, "grafana-piechart-panel": true, "grafana-worldmap-panel": true, "heatmap-old": true}
	allowedVariables = map[string]bool{"datasource": true, "cluster": true, "node": true, "gpu": true, "namespace": true, "pod": true, "slurm_job_id": true, "slurm_job_sluid": true, "currency": true}
	builtinVariables = map[string]bool{"__interval": true, "__rate_interval": true, "__range": true, "__range_s": true}
	variableRef      = regexp.MustCompile(`\$\{?(\w+)`)
	wantDatasource   = map[string]any{"type": "prometheus", "uid": "${datasource}"}
)

// committed reads the dashboards committed in this directory.
func committed(t *testing.T) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob("*.json")
	require.NoError(t, err)
	out := map[string][]byte{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		out[p] = data
	}
	return out
}

type dashboard struct {
	file  string
	model map[string]any
}

func parsed(t *testing.T) []dashboard {
	t.Helper()
	files := committed(t)
	var out []dashboard
	for _, name := range slices.Sorted(maps.Keys(files)) {
		var m map[string]any
		require.NoError(t, json.Unmarshal(files[name], &m), "%s does not parse", name)
		out = append(out, dashboard{file: name, model: m})
	}
	require.Len(t, out, len(wantUIDs))
	return out
}

func TestCommittedFilesAreGenerated(t *testing.T) {
	gentest.Committed(t, ".", "*.json", dashboards.Render, "make generate")
}

func TestDashboardUIDs(t *testing.T) {
	seen := map[string]bool{}
	for _, d := range parsed(t) {
		uid, _ := d.model["uid"].(string)
		assert.Equal(t, wantUIDs[d.file], uid, d.file)
		assert.False(t, seen[uid], "uid %q used twice", uid)
		seen[uid] = true
		assert.NotEmpty(t, d.model["title"], d.file)
		assert.EqualValues(t, dashboards.SchemaVersion, d.model["schemaVersion"], d.file)
		assert.EqualValues(t, 39, dashboards.SchemaVersion, "Grafana 10 and 11 read schema 39")
	}
	for _, d := range dashboards.All() {
		assert.Equal(t, wantUIDs[d.File], d.UID)
	}
}

// panels returns every panel: top-level ones and those nested in collapsed rows.
func panels(m map[string]any) []map[string]any {
	var out []map[string]any
	for _, p := range list(m["panels"]) {
		pm := p.(map[string]any)
		out = append(out, pm)
		for _, n := range list(pm["panels"]) {
			out = append(out, n.(map[string]any))
		}
	}
	return out
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

func targets(p map[string]any) []map[string]any {
	var out []map[string]any
	for _, t := range list(p["targets"]) {
		out = append(out, t.(map[string]any))
	}
	return out
}

func TestPanels(t *testing.T) {
	for _, d := range parsed(t) {
		t.Run(d.file, func(t *testing.T) {
			ids := map[float64]bool{}
			for _, p := range panels(d.model) {
				typ, _ := p["type"].(string)
				title, _ := p["title"].(string)
				where := fmt.Sprintf("panel %v %q", p["id"], title)
				assert.NotEmpty(t, title, where)
				id, ok := p["id"].(float64)
				if assert.True(t, ok && id > 0, "%s: no id", where) {
					assert.False(t, ids[id], "%s: id used twice", where)
					ids[id] = true
				}
				assert.False(t, deprecatedPanels[typ], "%s: deprecated panel type %q", where, typ)
				assert.True(t, allowedPanels[typ], "%s: panel type %q not allowed", where, typ)
				assert.Equal(t, wantDatasource, p["datasource"], "%s: datasource is not the variable", where)

				pos, ok := p["gridPos"].(map[string]any)
				if assert.True(t, ok, "%s: no gridPos", where) {
					x, w, h := pos["x"].(float64), pos["w"].(float64), pos["h"].(float64)
					assert.True(t, w > 0 && h > 0 && x >= 0 && x+w <= 24, "%s: bad gridPos %v", where, pos)
				}
				if typ == "row" {
					assert.Empty(t, p["targets"], where)
					continue
				}
				assert.NotEmpty(t, p["description"], "%s: no description", where)
				unit, _ := p["fieldConfig"].(map[string]any)["defaults"].(map[string]any)["unit"].(string)
				assert.NotEmpty(t, unit, "%s: no unit", where)
				ts := targets(p)
				assert.NotEmpty(t, ts, "%s: no query", where)
				refs := map[string]bool{}
				for _, tg := range ts {
					assert.Equal(t, wantDatasource, tg["datasource"], "%s: query datasource is not the variable", where)
					ref, _ := tg["refId"].(string)
					assert.False(t, refs[ref], "%s: refId %q used twice", where, ref)
					refs[ref] = true
					assert.NotEmpty(t, tg["expr"], where)
				}
			}
		})
	}
}

// TestLayout: panels do not overlap (top level, and within each collapsed row).
func TestLayout(t *testing.T) {
	type rect struct{ x, y, w, h float64 }
	overlap := func(a, b rect) bool {
		return a.x < b.x+b.w && b.x < a.x+a.w && a.y < b.y+b.h && b.y < a.y+a.h
	}
	check := func(t *testing.T, ps []any) {
		var seen []rect
		for _, p := range ps {
			pos := p.(map[string]any)["gridPos"].(map[string]any)
			r := rect{pos["x"].(float64), pos["y"].(float64), pos["w"].(float64), pos["h"].(float64)}
			for _, o := range seen {
				assert.False(t, overlap(r, o), "panel %v overlaps another", p.(map[string]any)["title"])
			}
			seen = append(seen, r)
		}
	}
	for _, d := range parsed(t) {
		t.Run(d.file, func(t *testing.T) {
			check(t, list(d.model["panels"]))
			for _, p := range list(d.model["panels"]) {
				check(t, list(p.(map[string]any)["panels"]))
			}
		})
	}
}

func variables(m map[string]any) []map[string]any {
	var out []map[string]any
	for _, v := range list(m["templating"].(map[string]any)["list"]) {
		out = append(out, v.(map[string]any))
	}
	return out
}

func TestVariables(t *testing.T) {
	for _, d := range parsed(t) {
		t.Run(d.file, func(t *testing.T) {
			vars := variables(d.model)
			require.NotEmpty(t, vars)
			assert.Equal(t, "datasource", vars[0]["name"])
			assert.Equal(t, "datasource", vars[0]["type"])
			assert.Equal(t, "prometheus", vars[0]["query"])

			var exprs, titles []string
			for _, p := range panels(d.model) {
				for _, tg := range targets(p) {
					exprs = append(exprs, tg["expr"].(string))
				}
				title, _ := p["title"].(string)
				titles = append(titles, title)
			}
			all := strings.Join(exprs, "\n")
			defined := map[string]bool{}
			for _, v := range vars {
				name := v["name"].(string)
				assert.True(t, allowedVariables[name], "unexpected variable %q", name)
				assert.False(t, defined[name], "variable %q defined twice", name)
				defined[name] = true
				if name == "datasource" {
					continue
				}
				assert.Equal(t, "query", v["type"], name)
				assert.Equal(t, wantDatasource, v["datasource"], "variable %q: datasource is not the variable", name)
				q := v["query"].(string)
				if name != "cluster" {
					assert.Regexp(t, `cluster=~"\$cluster\|?"`, q, "variable %q is not filtered by cluster", name)
				}
				// A variable filters panel queries, or names something in titles (the currency).
				assert.True(t, usesVariable(all, name) || usesVariable(strings.Join(titles, "\n"), name), "variable %q is used by no panel query or title", name)
			}
			// Every variable a query refers to is defined here, or is one of Grafana's.
			for _, v := range vars {
				if q, ok := v["query"].(string); ok && v["type"] == "query" {
					exprs = append(exprs, q)
				}
			}
			for _, e := range exprs {
				for _, m := range variableRef.FindAllStringSubmatch(stripStrings(e, "$1"), -1) {
					assert.True(t, defined[m[1]] || builtinVariables[m[1]], "undefined variable $%s in %s", m[1], e)
				}
			}
		})
	}
}

func usesVariable(text, name string) bool {
	return regexp.MustCompile(`\$(` + name + `\b|\{` + name + `[}:])`).MatchString(text)
}

// stripStrings removes the given literal (e.g. label_replace's "$1") so it is not taken for
// a variable.
func stripStrings(expr, literal string) string {
	return strings.ReplaceAll(expr, `"`+literal+`"`, `""`)
}

// queries returns every PromQL query of a committed dashboard: panel queries and query
// variables' expressions.
func queries(t *testing.T, m map[string]any) (panelExprs, variableExprs []string) {
	for _, p := range panels(m) {
		for _, tg := range targets(p) {
			panelExprs = append(panelExprs, tg["expr"].(string))
		}
	}
	for _, v := range variables(m) {
		if v["type"] != "query" {
			continue
		}
		expr, ok := dashboards.VariableExpr(v["query"].(string))
		require.True(t, ok, "variable %v: cannot read its query", v["name"])
		variableExprs = append(variableExprs, expr)
	}
	return panelExprs, variableExprs
}

// TestEverySelectorFiltersOnCluster: every vector selector of every query carries
// cluster=~"$cluster" (but the cluster variable's own query), or cluster=~"$cluster|" for
// series the rules write without a cluster label (prices, per-model counts), which stay
// when a cluster is chosen.
func TestEverySelectorFiltersOnCluster(t *testing.T) {
	for _, d := range parsed(t) {
		t.Run(d.file, func(t *testing.T) {
			panelExprs, varExprs := queries(t, d.model)
			for _, e := range append(panelExprs, varExprs[1:]...) { // [0]: the cluster variable
				sels, err := promql.Selectors(e)
				require.NoError(t, err, e)
				require.NotEmpty(t, sels, e)
				for _, s := range sels {
					assert.True(t, s.Has("cluster", labels.MatchRegexp, "$cluster") || s.Has("cluster", labels.MatchRegexp, "$cluster|"),
						"%s has no cluster filter in %s", s.Metric, e)
				}
			}
		})
	}
}

// TestMetricNames: MetricNames lists exactly the metrics the committed dashboards select.
func TestMetricNames(t *testing.T) {
	got, err := dashboards.MetricNames()
	require.NoError(t, err)
	assert.True(t, sort.StringsAreSorted(got))
	want := map[string]bool{}
	for _, d := range parsed(t) {
		panelExprs, varExprs := queries(t, d.model)
		for _, e := range append(panelExprs, varExprs...) {
			names, err := promql.MetricNames(e)
			require.NoError(t, err, e)
			for _, n := range names {
				want[n] = true
			}
		}
	}
	assert.Equal(t, slices.Sorted(maps.Keys(want)), got)
	for _, n := range []string{"hw_gpu_utilization_ratio", "nvidia_gpu_pod_utilization_ratio", "ALERTS", "container_cpu_usage_seconds_total", "nvidia_nvml_available"} {
		assert.Contains(t, got, n)
	}
	for _, n := range got {
		assert.NotContains(t, []string{"by", "sum", "rate", "host_name", "hw_id", "k8s_pod_name", "le"}, n)
	}
}

// TestLabelValuesTakeASelector: Grafana sends label_values(expr, label)'s expr to
// Prometheus's series API as a match[] selector, which refuses anything else (a function,
// an aggregation): such a variable would list nothing. query_result(expr) runs any PromQL.
func TestLabelValuesTakeASelector(t *testing.T) {
	for _, d := range parsed(t) {
		for _, v := range variables(d.model) {
			q, _ := v["query"].(string)
			if v["type"] != "query" || !strings.HasPrefix(strings.TrimSpace(q), "label_values(") {
				continue
			}
			expr, ok := dashboards.VariableExpr(q)
			if !ok {
				continue // label_values(label): no expression
			}
			parsed, err := promql.Parse(expr)
			require.NoError(t, err, expr)
			_, isSelector := parsed.(*parser.VectorSelector)
			assert.True(t, isSelector, "%s: variable %v: label_values takes a series selector, not %s", d.file, v["name"], expr)
		}
	}
}

func TestVariableExpr(t *testing.T) {
	for q, want := range map[string]string{
		`label_values(up{job="a"}, instance)`:                      `up{job="a"}`,
		`label_values(sum by (a, b) (up{x=",)"}), a)`:              `sum by (a, b) (up{x=",)"})`,
		`query_result(topk(5, up))`:                                `topk(5, up)`,
		` label_values(nvidia_nvml_available, cluster) `:           `nvidia_nvml_available`,
		`label_values(rate(a_total[5m]) > 0, hw_id)`:               `rate(a_total[5m]) > 0`,
		`label_values(a{cluster=~"$cluster"}, k8s_namespace_name)`: `a{cluster=~"$cluster"}`,
	} {
		got, ok := dashboards.VariableExpr(q)
		assert.True(t, ok, q)
		assert.Equal(t, want, got, q)
	}
	for _, q := range []string{`label_values(instance)`, `label_names()`, `metrics(hw_.*)`, `prometheus`} {
		_, ok := dashboards.VariableExpr(q)
		assert.False(t, ok, q)
	}
}

// TestPromQLParses runs every query, Grafana's interval variables replaced by sample
// values, through promtool as recording rules: the Prometheus the rules' tests use (2.42,
// older than the parser the contract tests link) reads them too. `make deps` installs
// promtool.
func TestPromQLParses(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found (%v): `make deps` installs Debian's prometheus package", err)
	}
	var rules strings.Builder
	rules.WriteString("groups:\n- name: dashboards\n  rules:\n")
	n := 0
	for _, d := range parsed(t) {
		panelExprs, varExprs := queries(t, d.model)
		for _, e := range append(panelExprs, varExprs...) {
			n++
			quoted, err := json.Marshal(promql.Substitute(e)) // a JSON string is a YAML string
			require.NoError(t, err)
			name := strings.ReplaceAll(strings.TrimSuffix(d.file, ".json"), "-", "_")
			fmt.Fprintf(&rules, "  - record: dashboard:%s:query_%d\n    expr: %s\n", name, n, quoted)
		}
	}
	path := filepath.Join(t.TempDir(), "rules.yaml")
	require.NoError(t, os.WriteFile(path, []byte(rules.String()), 0o600))
	out, err := exec.Command(promtool, "check", "rules", path).CombinedOutput()
	assert.NoError(t, err, "promtool check rules:\n%s", out)
}

// TestPanelsSayWhatNeedsTheFullOverlay: a panel that reads series the agent leaves out by
// default says that it needs the full overlay, and no other panel says so; variables read
// the default set only.
func TestPanelsSayWhatNeedsTheFullOverlay(t *testing.T) {
	def, err := contract.DefaultSet("..")
	require.NoError(t, err)
	// lacks says why the default set lacks something a query selects, or "".
	lacks := func(query string) string {
		sels, err := promql.Selectors(query)
		require.NoError(t, err, query)
		for _, s := range sels {
			if why := def.Lacks(s); why != "" {
				return why
			}
		}
		return ""
	}
	marked := 0
	for _, d := range dashboards.All() {
		ps, err := d.Panels()
		require.NoError(t, err)
		for _, p := range ps {
			var why []string
			for _, q := range p.Queries {
				if w := lacks(q); w != "" {
					why = append(why, w)
				}
			}
			if p.NeedsFullOverlay() {
				marked++
				assert.NotEmpty(t, why, "%s: panel %q says it %s, but reads only the default set", d.File, p.Title, dashboards.FullOverlay)
			} else {
				assert.Empty(t, why, "%s: panel %q reads series off by default; its description must say it %s", d.File, p.Title, dashboards.FullOverlay)
			}
		}
		// Queries lists the panels' queries, then the variables'.
		n := 0
		for _, p := range ps {
			n += len(p.Queries)
		}
		queries, err := d.Queries()
		require.NoError(t, err)
		for _, q := range queries[n:] {
			assert.Empty(t, lacks(q), "%s: variable query %s", d.File, q)
		}
	}
	assert.Positive(t, marked)
}
