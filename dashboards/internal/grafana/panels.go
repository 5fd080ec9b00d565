package grafana

// Units (Grafana unit ids) our dashboards use.
const (
	UnitRatio   = "percentunit" // 0–1 shown as %
	UnitBytes   = "bytes"       // IEC
	UnitBytesPS = "binBps"      // bytes/s, IEC
	UnitWatt    = "watt"
	UnitCelsius = "celsius"
	UnitHertz   = "hertz"
	UnitJoule   = "joule"
	UnitKWh     = "kwatth"
	UnitSeconds = "s"
	UnitHours   = "h"
	UnitShort   = "short"
	UnitNone    = "none"
	UnitPerSec  = "ops" // events per second
)

func newPanel(typ, title, unit string, targets []Target) *Panel {
	return &Panel{
		Type: typ, Title: title, Targets: targets,
		FieldConfig: &FieldConfig{
			Defaults: FieldDefaults{
				Unit:       unit,
				Color:      map[string]any{"mode": "palette-classic"},
				Thresholds: Steps("green"),
				Mappings:   []ValueMapping{},
				Custom:     map[string]any{},
			},
			Overrides: []Override{},
		},
		Options: map[string]any{},
	}
}

func reduceLast() map[string]any {
	return map[string]any{"calcs": []any{"lastNotNull"}, "fields": "", "values": false}
}

// TimeSeries is a time series panel: lines, a table legend with mean, max and last.
func TimeSeries(title, unit string, targets ...Target) *Panel {
	p := newPanel("timeseries", title, unit, targets)
	p.FieldConfig.Defaults.Custom = map[string]any{
		"drawStyle":         "line",
		"lineInterpolation": "linear",
		"lineWidth":         1,
		"fillOpacity":       10,
		"gradientMode":      "none",
		"showPoints":        "never",
		"pointSize":         4,
		"spanNulls":         false,
		"axisPlacement":     "auto",
		"axisLabel":         "",
		"axisSoftMin":       0,
		"stacking":          map[string]any{"mode": "none", "group": "A"},
		"thresholdsStyle":   map[string]any{"mode": "off"},
	}
	p.Options = map[string]any{
		"legend":  map[string]any{"showLegend": true, "displayMode": "table", "placement": "bottom", "calcs": []any{"mean", "max", "lastNotNull"}},
		"tooltip": map[string]any{"mode": "multi", "sort": "desc"},
	}
	return p
}

// Stat is a single-value panel (the latest value of an instant query).
func Stat(title, unit string, targets ...Target) *Panel {
	p := newPanel("stat", title, unit, targets)
	p.FieldConfig.Defaults.Color = map[string]any{"mode": "thresholds"}
	p.Options = map[string]any{
		"reduceOptions":     reduceLast(),
		"colorMode":         "value",
		"graphMode":         "none",
		"justifyMode":       "auto",
		"orientation":       "auto",
		"textMode":          "auto",
		"wideLayout":        true,
		"showPercentChange": false,
	}
	return p
}

// Gauge is a gauge panel.
func Gauge(title, unit string, targets ...Target) *Panel {
	p := newPanel("gauge", title, unit, targets)
	p.FieldConfig.Defaults.Color = map[string]any{"mode": "thresholds"}
	p.Options = map[string]any{
		"reduceOptions":        reduceLast(),
		"orientation":          "auto",
		"showThresholdLabels":  false,
		"showThresholdMarkers": true,
		"sizing":               "auto",
	}
	return p
}

// BarGauge is a horizontal bar gauge: one bar per series (or per bucket).
func BarGauge(title, unit string, targets ...Target) *Panel {
	p := newPanel("bargauge", title, unit, targets)
	p.FieldConfig.Defaults.Color = map[string]any{"mode": "thresholds"}
	p.Options = map[string]any{
		"reduceOptions": reduceLast(),
		"orientation":   "horizontal",
		"displayMode":   "gradient",
		"valueMode":     "color",
		"namePlacement": "auto",
		"showUnfilled":  true,
		"sizing":        "auto",
		"minVizWidth":   8,
		"minVizHeight":  16,
		"maxVizHeight":  300,
	}
	return p
}

// Table is a table panel over instant table queries. Several queries are merged into one
// row per label set (their values become the columns "Value #A", "Value #B", ...); Time is
// hidden.
func Table(title, unit string, targets ...Target) *Panel {
	p := newPanel("table", title, unit, targets)
	p.FieldConfig.Defaults.Color = map[string]any{"mode": "thresholds"}
	p.FieldConfig.Defaults.Custom = map[string]any{
		"align": "auto", "cellOptions": map[string]any{"type": "auto"}, "inspect": false, "filterable": true,
	}
	p.Options = map[string]any{
		"showHeader": true,
		"cellHeight": "sm",
		"footer":     map[string]any{"show": false, "reducer": []any{"sum"}, "countRows": false, "fields": ""},
	}
	if len(targets) > 1 {
		p.Transformations = append(p.Transformations, Transformation{ID: "merge", Options: map[string]any{}})
	}
	p.Transformations = append(p.Transformations, Transformation{ID: "organize", Options: map[string]any{
		"excludeByName": map[string]any{"Time": true},
		"indexByName":   map[string]any{},
		"renameByName":  map[string]any{},
	}})
	return p
}

// Heatmap shows series as rows of cells over time (calculate off: each series is a row,
// named by its legend), colored by value.
func Heatmap(title, unit string, targets ...Target) *Panel {
	p := newPanel("heatmap", title, unit, targets)
	p.FieldConfig.Defaults.Custom = map[string]any{
		"hideFrom":          map[string]any{"legend": false, "tooltip": false, "viz": false},
		"scaleDistribution": map[string]any{"type": "linear"},
	}
	p.Options = map[string]any{
		"calculate":    false,
		"cellGap":      1,
		"cellValues":   map[string]any{"unit": unit},
		"color":        map[string]any{"mode": "scheme", "scheme": "Turbo", "fill": "dark-orange", "scale": "linear", "exponent": 0.5, "steps": 64, "reverse": false},
		"exemplars":    map[string]any{"color": "rgba(255,0,255,0.7)"},
		"filterValues": map[string]any{"le": -1e-9},
		"legend":       map[string]any{"show": true},
		"rowsFrame":    map[string]any{"layout": "auto"},
		"showValue":    "never",
		"tooltip":      map[string]any{"mode": "single", "show": true, "yHistogram": false, "showColorScale": false},
		"yAxis":        map[string]any{"axisPlacement": "left", "reverse": true},
	}
	if unit == UnitRatio {
		p.Options["color"].(map[string]any)["min"] = 0
		p.Options["color"].(map[string]any)["max"] = 1
	}
	return p
}

// Describe sets the panel's description (the (i) tooltip).
func (p *Panel) Describe(text string) *Panel {
	p.Description = text
	return p
}

// Range sets the axis or gauge minimum and maximum.
func (p *Panel) Range(min, max float64) *Panel {
	p.FieldConfig.Defaults.Min, p.FieldConfig.Defaults.Max = &min, &max
	return p
}

// MinZero sets the minimum to 0.
func (p *Panel) MinZero() *Panel {
	z := 0.0
	p.FieldConfig.Defaults.Min = &z
	return p
}

// SoftMax sets a time series axis' soft maximum (the axis grows past it when the data do).
func (p *Panel) SoftMax(v float64) *Panel {
	p.FieldConfig.Defaults.Custom["axisSoftMax"] = v
	return p
}

// Decimals sets the number of decimals shown.
func (p *Panel) Decimals(n int) *Panel {
	p.FieldConfig.Defaults.Decimals = &n
	return p
}

// NoValue sets what a panel shows when its query returns nothing.
func (p *Panel) NoValue(text string) *Panel {
	p.FieldConfig.Defaults.NoValue = text
	return p
}

// Thresholds sets the threshold scale, and colors the values (stat, gauge, table) or draws
// the thresholds as dashed lines (time series).
func (p *Panel) Thresholds(t *Thresholds) *Panel {
	p.FieldConfig.Defaults.Thresholds = t
	if p.Type == "timeseries" {
		p.FieldConfig.Defaults.Custom["thresholdsStyle"] = map[string]any{"mode": "dashed"}
	}
	if p.Type == "table" {
		p.FieldConfig.Defaults.Custom["cellOptions"] = map[string]any{"type": "color-text"}
	}
	return p
}

// Mappings sets value mappings.
func (p *Panel) Mappings(m ...ValueMapping) *Panel {
	p.FieldConfig.Defaults.Mappings = append(p.FieldConfig.Defaults.Mappings, m...)
	return p
}

// Stacked stacks the series of a time series panel.
func (p *Panel) Stacked() *Panel {
	p.FieldConfig.Defaults.Custom["stacking"] = map[string]any{"mode": "normal", "group": "A"}
	p.FieldConfig.Defaults.Custom["fillOpacity"] = 60
	return p
}

// Bars draws a time series panel as bars.
func (p *Panel) Bars() *Panel {
	p.FieldConfig.Defaults.Custom["drawStyle"] = "bars"
	p.FieldConfig.Defaults.Custom["fillOpacity"] = 80
	return p
}

// Stepped draws lines as steps (for states and flags).
func (p *Panel) Stepped() *Panel {
	p.FieldConfig.Defaults.Custom["lineInterpolation"] = "stepAfter"
	return p
}

// Graph adds a sparkline to a stat panel.
func (p *Panel) Graph() *Panel {
	p.Options["graphMode"] = "area"
	return p
}

// Background colors a stat panel's background instead of its value.
func (p *Panel) Background() *Panel {
	p.Options["colorMode"] = "background"
	return p
}

// Vertical turns a bar gauge's bars upright (a histogram).
func (p *Panel) Vertical() *Panel {
	p.Options["orientation"] = "vertical"
	return p
}

// LegendRight puts a time series legend on the right.
func (p *Panel) LegendRight() *Panel {
	p.Options["legend"].(map[string]any)["placement"] = "right"
	return p
}

// OverrideQuery changes the fields of one query (by refId: "A", "B", ...).
func (p *Panel) OverrideQuery(refID string, props ...map[string]any) *Panel {
	p.FieldConfig.Overrides = append(p.FieldConfig.Overrides, Override{
		Matcher: map[string]any{"id": "byFrameRefID", "options": refID}, Properties: props,
	})
	return p
}

// OverrideField changes the fields with that name (e.g. a table column "Value #B").
func (p *Panel) OverrideField(name string, props ...map[string]any) *Panel {
	p.FieldConfig.Overrides = append(p.FieldConfig.Overrides, Override{
		Matcher: map[string]any{"id": "byName", "options": name}, Properties: props,
	})
	return p
}

// Columns renames table columns (label or "Value #X" to header) and orders them as given.
func (p *Panel) Columns(pairs ...string) *Panel {
	for _, t := range p.Transformations {
		if t.ID != "organize" {
			continue
		}
		rename := t.Options["renameByName"].(map[string]any)
		index := t.Options["indexByName"].(map[string]any)
		for i := 0; i+1 < len(pairs); i += 2 {
			rename[pairs[i]] = pairs[i+1]
			index[pairs[i]] = i / 2
		}
	}
	return p
}

// Hide hides table columns.
func (p *Panel) Hide(columns ...string) *Panel {
	for _, t := range p.Transformations {
		if t.ID == "organize" {
			for _, c := range columns {
				t.Options["excludeByName"].(map[string]any)[c] = true
			}
		}
	}
	return p
}

// SortBy sorts a table by a column.
func (p *Panel) SortBy(column string, desc bool) *Panel {
	p.Options["sortBy"] = []any{map[string]any{"displayName": column, "desc": desc}}
	return p
}

// WithTimeFrom makes the panel show its own relative time range (e.g. 24h).
func (p *Panel) WithTimeFrom(r string) *Panel {
	p.TimeFrom = r
	return p
}

// WithInterval sets the panel's minimum query step (and $__interval).
func (p *Panel) WithInterval(i string) *Panel {
	p.Interval = i
	return p
}

// WithLinks adds panel links.
func (p *Panel) WithLinks(l ...Link) *Panel {
	p.Links = append(p.Links, l...)
	return p
}

// Property helpers for overrides.

// Unit sets a field's unit.
func Unit(u string) map[string]any { return map[string]any{"id": "unit", "value": u} }

// DisplayName sets a field's name.
func DisplayName(n string) map[string]any { return map[string]any{"id": "displayName", "value": n} }

// Dashed draws a field as a dashed line without fill.
func Dashed() []map[string]any {
	return []map[string]any{
		{"id": "custom.lineStyle", "value": map[string]any{"fill": "dash", "dash": []any{10, 10}}},
		{"id": "custom.fillOpacity", "value": 0},
	}
}

// RightAxis puts a field on a right-hand axis.
func RightAxis() map[string]any {
	return map[string]any{"id": "custom.axisPlacement", "value": "right"}
}

// FixedColor colors a field.
func FixedColor(c string) map[string]any {
	return map[string]any{"id": "color", "value": map[string]any{"mode": "fixed", "fixedColor": c}}
}

// CellColorBackground colors table cells' backgrounds by thresholds or mappings.
func CellColorBackground() map[string]any {
	return map[string]any{"id": "custom.cellOptions", "value": map[string]any{"type": "color-background"}}
}

// CellGauge draws table cells as gauges.
func CellGauge() map[string]any {
	return map[string]any{"id": "custom.cellOptions", "value": map[string]any{"type": "gauge", "mode": "basic"}}
}

// FieldMappings sets a field's value mappings.
func FieldMappings(m ...ValueMapping) map[string]any {
	return map[string]any{"id": "mappings", "value": m}
}

// FieldThresholds sets a field's thresholds.
func FieldThresholds(t *Thresholds) map[string]any {
	return map[string]any{"id": "thresholds", "value": t}
}

// Min sets a field's minimum.
func Min(v float64) map[string]any { return map[string]any{"id": "min", "value": v} }

// Max sets a field's maximum.
func Max(v float64) map[string]any { return map[string]any{"id": "max", "value": v} }
