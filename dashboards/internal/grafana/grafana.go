// Package grafana is a small builder for Grafana dashboards (JSON model, schemaVersion 39):
// just the panel types, options and layout our dashboards use. Every panel, query and query
// variable reads from the Prometheus data source chosen in the `datasource` variable.
package grafana

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// SchemaVersion is the dashboard JSON schema version written (Grafana 10.x / 11.x).
const SchemaVersion = 39

// Datasource points at a data source.
type Datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// Prometheus is the data source every panel and query variable uses: the one chosen in the
// `datasource` template variable.
var Prometheus = Datasource{Type: "prometheus", UID: "${datasource}"}

// GridPos places a panel on the 24-column grid.
type GridPos struct {
	H int `json:"h"`
	W int `json:"w"`
	X int `json:"x"`
	Y int `json:"y"`
}

// Target is one Prometheus query of a panel.
type Target struct {
	Datasource   Datasource `json:"datasource"`
	RefID        string     `json:"refId"`
	Expr         string     `json:"expr"`
	LegendFormat string     `json:"legendFormat,omitempty"`
	Format       string     `json:"format"`
	Instant      bool       `json:"instant"`
	Range        bool       `json:"range"`
	Interval     string     `json:"interval,omitempty"`
	EditorMode   string     `json:"editorMode"`
}

// Query is a range query (time series) with a legend.
func Query(expr, legend string) Target {
	return Target{Expr: expr, LegendFormat: legend, Format: "time_series", Range: true}
}

// Instant is an instant query (the latest value), for stats, gauges and bar gauges.
func Instant(expr, legend string) Target {
	return Target{Expr: expr, LegendFormat: legend, Format: "time_series", Instant: true}
}

// TableQuery is an instant query returned as a table (one row per series, one column per
// label).
func TableQuery(expr string) Target {
	return Target{Expr: expr, Format: "table", Instant: true}
}

// Threshold is one step of a threshold scale; the first step's Value is nil (base).
type Threshold struct {
	Color string   `json:"color"`
	Value *float64 `json:"value"`
}

// Thresholds is a panel's threshold scale.
type Thresholds struct {
	Mode  string      `json:"mode"`
	Steps []Threshold `json:"steps"`
}

// Steps builds absolute thresholds: a base color then (value, color) pairs.
func Steps(base string, steps ...any) *Thresholds {
	t := &Thresholds{Mode: "absolute", Steps: []Threshold{{Color: base}}}
	for i := 0; i+1 < len(steps); i += 2 {
		v := toFloat(steps[i])
		t.Steps = append(t.Steps, Threshold{Color: steps[i+1].(string), Value: &v})
	}
	return t
}

func toFloat(v any) float64 {
	switch n := v.(type) {
	case int:
		return float64(n)
	case float64:
		return n
	}
	panic(fmt.Sprintf("grafana: threshold value %v is not a number", v))
}

// ValueMapping maps values to text and color.
type ValueMapping struct {
	Type    string         `json:"type"`
	Options map[string]any `json:"options"`
}

// ValueText maps exact values to text and colors: value, text, color, value, text, color...
func ValueText(triples ...string) ValueMapping {
	opts := map[string]any{}
	for i := 0; i+2 < len(triples); i += 3 {
		opts[triples[i]] = map[string]any{"text": triples[i+1], "color": triples[i+2], "index": i / 3}
	}
	return ValueMapping{Type: "value", Options: opts}
}

// FieldDefaults are a panel's field defaults.
type FieldDefaults struct {
	Unit        string         `json:"unit,omitempty"`
	Min         *float64       `json:"min,omitempty"`
	Max         *float64       `json:"max,omitempty"`
	Decimals    *int           `json:"decimals,omitempty"`
	NoValue     string         `json:"noValue,omitempty"`
	Color       map[string]any `json:"color"`
	Thresholds  *Thresholds    `json:"thresholds"`
	Mappings    []ValueMapping `json:"mappings"`
	Custom      map[string]any `json:"custom"`
	DisplayName string         `json:"displayName,omitempty"`
}

// Override changes the field config of matching fields.
type Override struct {
	Matcher    map[string]any   `json:"matcher"`
	Properties []map[string]any `json:"properties"`
}

// FieldConfig is a panel's field config.
type FieldConfig struct {
	Defaults  FieldDefaults `json:"defaults"`
	Overrides []Override    `json:"overrides"`
}

// Transformation is a data transformation of a panel.
type Transformation struct {
	ID      string         `json:"id"`
	Options map[string]any `json:"options"`
}

// Link is a dashboard or panel link.
type Link struct {
	Title       string   `json:"title"`
	Type        string   `json:"type,omitempty"`
	URL         string   `json:"url,omitempty"`
	Tags        []string `json:"tags,omitempty"`
	AsDropdown  bool     `json:"asDropdown,omitempty"`
	IncludeVars bool     `json:"includeVars"`
	KeepTime    bool     `json:"keepTime"`
}

// Panel is a Grafana panel (or a row).
type Panel struct {
	ID              int              `json:"id"`
	Type            string           `json:"type"`
	Title           string           `json:"title"`
	Description     string           `json:"description,omitempty"`
	Datasource      Datasource       `json:"datasource"`
	GridPos         GridPos          `json:"gridPos"`
	Targets         []Target         `json:"targets,omitempty"`
	FieldConfig     *FieldConfig     `json:"fieldConfig,omitempty"`
	Options         map[string]any   `json:"options,omitempty"`
	Transformations []Transformation `json:"transformations,omitempty"`
	TimeFrom        string           `json:"timeFrom,omitempty"`
	Interval        string           `json:"interval,omitempty"`
	MaxDataPoints   int              `json:"maxDataPoints,omitempty"`
	Links           []Link           `json:"links,omitempty"`
	Collapsed       *bool            `json:"collapsed,omitempty"`
	Panels          []*Panel         `json:"panels,omitempty"`

	w, h int
}

// Variable is a template variable.
type Variable struct {
	Name        string         `json:"name"`
	Label       string         `json:"label"`
	Type        string         `json:"type"`
	Description string         `json:"description,omitempty"`
	Datasource  *Datasource    `json:"datasource,omitempty"`
	Query       string         `json:"query"`
	Definition  string         `json:"definition,omitempty"`
	Regex       string         `json:"regex"`
	Refresh     int            `json:"refresh"`
	Sort        int            `json:"sort"`
	Multi       bool           `json:"multi"`
	IncludeAll  bool           `json:"includeAll"`
	AllValue    string         `json:"allValue,omitempty"`
	Current     map[string]any `json:"current"`
	Options     []any          `json:"options"`
	Hide        int            `json:"hide"`
}

// DatasourceVariable is the `datasource` variable: which Prometheus to read.
func DatasourceVariable() Variable {
	return Variable{
		Name: "datasource", Label: "Data source", Type: "datasource", Query: "prometheus",
		Refresh: 1, Current: map[string]any{}, Options: []any{},
	}
}

// QueryVariable is a variable whose values come from a Prometheus query such as
// label_values(metric{...}, label). With all, it offers "All" (regex .*, which also
// matches series without the label) and several values at once, and starts at All.
func QueryVariable(name, label, query string, all bool) Variable {
	ds := Prometheus
	v := Variable{
		Name: name, Label: label, Type: "query", Datasource: &ds, Query: query, Definition: query,
		Refresh: 2, Sort: 1, Current: map[string]any{}, Options: []any{},
	}
	if all {
		v.Multi, v.IncludeAll, v.AllValue = true, true, ".*"
		v.Current = map[string]any{"selected": true, "text": []any{"All"}, "value": []any{"$__all"}}
	}
	return v
}

// Dashboard is a dashboard under construction: panels are placed left to right and top to
// bottom in the order they are added; rows start a new line.
type Dashboard struct {
	UID, Title, Description string
	Tags                    []string
	From                    string // time range start, e.g. now-6h
	Refresh                 string
	Variables               []Variable
	Links                   []Link

	items []*Panel // top-level panels and rows, in order
}

// New starts a dashboard.
func New(uid, title, description string, tags ...string) *Dashboard {
	return &Dashboard{UID: uid, Title: title, Description: description, Tags: tags, From: "now-6h", Refresh: "1m"}
}

// Row starts a row; panels added after it belong to it. A collapsed row holds its panels
// until it is opened.
func (d *Dashboard) Row(title string, collapsed bool) {
	c := collapsed
	d.items = append(d.items, &Panel{Type: "row", Title: title, Collapsed: &c, Panels: []*Panel{}})
}

// Add places panels of width w and height h after the previous ones.
func (d *Dashboard) Add(w, h int, panels ...*Panel) {
	for _, p := range panels {
		if w < 1 || w > 24 || h < 1 {
			panic(fmt.Sprintf("grafana: panel %q: bad size %dx%d", p.Title, w, h))
		}
		p.w, p.h = w, h
		if n := len(d.items); n > 0 && d.items[n-1].Type == "row" && *d.items[n-1].Collapsed {
			d.items[n-1].Panels = append(d.items[n-1].Panels, p)
			continue
		}
		// Panels of an open row follow it at the top level.
		d.items = append(d.items, p)
	}
}

// Panels returns the top-level panels and rows (a collapsed row holds its panels), laid out.
func (d *Dashboard) Panels() []*Panel { return d.layout() }

// layout assigns ids, refIds, data sources and grid positions.
func (d *Dashboard) layout() []*Panel {
	id := 0
	x, y, lineH := 0, 0, 0
	place := func(p *Panel) {
		id++
		p.ID = id
		p.Datasource = Prometheus
		for i := range p.Targets {
			p.Targets[i].Datasource = Prometheus
			p.Targets[i].RefID = string(rune('A' + i))
			p.Targets[i].EditorMode = "code"
		}
		if x+p.w > 24 {
			x, y, lineH = 0, y+lineH, 0
		}
		p.GridPos = GridPos{H: p.h, W: p.w, X: x, Y: y}
		x += p.w
		if p.h > lineH {
			lineH = p.h
		}
	}
	newLine := func() {
		if x > 0 {
			x, y, lineH = 0, y+lineH, 0
		}
	}
	for _, it := range d.items {
		if it.Type != "row" {
			place(it)
			continue
		}
		newLine()
		id++
		it.ID = id
		it.Datasource = Prometheus
		it.GridPos = GridPos{H: 1, W: 24, X: 0, Y: y}
		y++
		if *it.Collapsed {
			// Nested panels are laid out as they will be when the row opens; the next row
			// follows right below this one.
			top := y
			for _, p := range it.Panels {
				place(p)
			}
			x, y, lineH = 0, top, 0
		}
	}
	return d.items
}

// JSON renders the dashboard: indented, keys sorted, no HTML escaping, a final newline. The
// same dashboard always renders to the same bytes.
func (d *Dashboard) JSON() ([]byte, error) {
	model := map[string]any{
		"id":                   nil,
		"uid":                  d.UID,
		"title":                d.Title,
		"description":          d.Description,
		"tags":                 d.Tags,
		"schemaVersion":        SchemaVersion,
		"version":              1,
		"editable":             true,
		"graphTooltip":         1,
		"fiscalYearStartMonth": 0,
		"liveNow":              false,
		"timezone":             "",
		"weekStart":            "",
		"refresh":              d.Refresh,
		"time":                 map[string]any{"from": d.From, "to": "now"},
		"timepicker":           map[string]any{},
		"annotations":          map[string]any{"list": []any{}},
		"links":                nonNil(d.Links),
		"templating":           map[string]any{"list": nonNil(d.Variables)},
		"panels":               d.layout(),
	}
	var raw bytes.Buffer
	enc := json.NewEncoder(&raw)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(model); err != nil {
		return nil, err
	}
	// Decode and encode again so that every object's keys are sorted.
	dec := json.NewDecoder(&raw)
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return nil, err
	}
	// Rows always carry their (possibly empty) panel list, as Grafana writes them.
	for _, p := range generic.(map[string]any)["panels"].([]any) {
		if pm := p.(map[string]any); pm["type"] == "row" && pm["panels"] == nil {
			pm["panels"] = []any{}
		}
	}
	var out bytes.Buffer
	enc = json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(generic); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
