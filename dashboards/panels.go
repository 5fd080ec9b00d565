package dashboards

import (
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/bargauge"
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/heatmap"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
	"github.com/grafana/grafana-foundation-sdk/go/units"
)

// Our panel defaults on top of Grafana's foundation SDK (github.com/grafana/grafana-foundation-sdk):
// every panel and query reads the Prometheus chosen in the `datasource` variable, carries
// an explicit threshold scale (without one, Grafana would colour values red from 80 on),
// and gets refIds A, B, ... so that overrides and table columns ("Value #B") can name
// its queries.

// datasource is the Prometheus chosen in the `datasource` template variable.
func datasource() common.DataSourceRef {
	return common.DataSourceRef{Type: ptr("prometheus"), Uid: ptr("${datasource}")}
}

func ptr[T any](v T) *T { return &v }

// query is a range query (time series) with a legend.
func query(expr, legend string) *prometheus.DataqueryBuilder {
	q := prometheus.NewDataqueryBuilder().Expr(expr).Range().Format(prometheus.PromQueryFormatTimeSeries)
	if legend != "" {
		q.LegendFormat(legend)
	}
	return q
}

// instant is an instant query (the latest value), for stats and bar gauges.
func instant(expr, legend string) *prometheus.DataqueryBuilder {
	return query(expr, legend).Instant()
}

// tableQuery is an instant query returned as a table: one row per series, one column per
// label.
func tableQuery(expr string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().Expr(expr).Instant().Format(prometheus.PromQueryFormatTable)
}

// targets names the queries A, B, ... and points them at the datasource variable.
func targets(qs []*prometheus.DataqueryBuilder) []*prometheus.DataqueryBuilder {
	for i, q := range qs {
		q.RefId(string(rune('A' + i))).Datasource(datasource()).EditorMode(prometheus.QueryEditorModeCode)
	}
	return qs
}

// step is one step of a threshold scale: from value At on, colour Color.
type step struct {
	At    float64
	Color string
}

// thresholdScale is a panel's or a field's threshold scale.
type thresholdScale = built[dashboard.ThresholdsConfig]

// scale is an absolute threshold scale: a base colour, then steps.
func scale(base string, steps ...step) thresholdScale {
	t := dashboard.ThresholdsConfig{Mode: dashboard.ThresholdsModeAbsolute, Steps: []dashboard.Threshold{{Color: base}}}
	for _, s := range steps {
		t.Steps = append(t.Steps, dashboard.Threshold{Value: ptr(s.At), Color: s.Color})
	}
	return thresholdScale{t}
}

// built wraps a finished value as a builder, where the SDK wants one.
type built[T any] struct{ v T }

func (b built[T]) Build() (T, error) { return b.v, nil }

func colorMode(mode dashboard.FieldColorModeId) built[dashboard.FieldColor] {
	return built[dashboard.FieldColor]{dashboard.FieldColor{Mode: mode}}
}

// valueText maps exact values to text and colour.
func valueText(mappings ...[3]string) dashboard.ValueMapping {
	m := dashboard.NewValueMap()
	for i, v := range mappings {
		m.Options[v[0]] = dashboard.ValueMappingResult{Text: ptr(v[1]), Color: ptr(v[2]), Index: ptr(int32(i))}
	}
	return dashboard.ValueMapping{ValueMap: m}
}

func reduceLast() *common.ReduceDataOptionsBuilder {
	return common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}).Fields("").Values(false)
}

// timeSeries is a time series panel: lines, a table legend with mean, max and last.
func timeSeries(title, unit string, qs ...*prometheus.DataqueryBuilder) *timeseries.PanelBuilder {
	p := timeseries.NewPanelBuilder().Title(title).Unit(unit).Datasource(datasource()).
		ColorScheme(colorMode(dashboard.FieldColorModeIdPaletteClassic)).Thresholds(scale("green")).
		DrawStyle(common.GraphDrawStyleLine).LineInterpolation(common.LineInterpolationLinear).LineWidth(1).
		FillOpacity(10).GradientMode(common.GraphGradientModeNone).ShowPoints(common.VisibilityModeNever).
		PointSize(4).SpanNulls(common.BoolOrFloat64{Bool: ptr(false)}).AxisPlacement(common.AxisPlacementAuto).
		AxisLabel("").AxisSoftMin(0).
		Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNone).Group("A")).
		ThresholdsStyle(common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeOff)).
		Legend(common.NewVizLegendOptionsBuilder().ShowLegend(true).DisplayMode(common.LegendDisplayModeTable).
			Placement(common.LegendPlacementBottom).Calcs([]string{"mean", "max", "lastNotNull"})).
		Tooltip(common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeMulti).Sort(common.SortOrderDescending))
	for _, q := range targets(qs) {
		p.WithTarget(q)
	}
	return p
}

// background colours a stat's background instead of its value.
const background = common.BigValueColorModeBackground

// normalStack stacks the series of a time series panel.
func normalStack() *common.StackingConfigBuilder {
	return common.NewStackingConfigBuilder().Mode(common.StackingModeNormal).Group("A")
}

// sorted sorts a table by a column.
func sorted(column string, desc bool) []cog.Builder[common.TableSortByFieldState] {
	return []cog.Builder[common.TableSortByFieldState]{common.NewTableSortByFieldStateBuilder().DisplayName(column).Desc(desc)}
}

// dashedThresholds draws a time series' thresholds as dashed lines.
func dashedThresholds() *common.GraphThresholdsStyleConfigBuilder {
	return common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeDashed)
}

// statPanel is a single-value panel: the latest value of an instant query, coloured by
// thresholds.
func statPanel(title, unit string, qs ...*prometheus.DataqueryBuilder) *stat.PanelBuilder {
	p := stat.NewPanelBuilder().Title(title).Unit(unit).Datasource(datasource()).
		ColorScheme(colorMode(dashboard.FieldColorModeIdThresholds)).Thresholds(scale("green")).
		ReduceOptions(reduceLast()).ColorMode(common.BigValueColorModeValue).GraphMode(common.BigValueGraphModeNone).
		JustifyMode(common.BigValueJustifyModeAuto).Orientation(common.VizOrientationAuto).
		TextMode(common.BigValueTextModeAuto).WideLayout(true).ShowPercentChange(false)
	for _, q := range targets(qs) {
		p.WithTarget(q)
	}
	return p
}

// barGauge is a horizontal bar gauge: one bar per series (or per bucket).
func barGauge(title, unit string, qs ...*prometheus.DataqueryBuilder) *bargauge.PanelBuilder {
	p := bargauge.NewPanelBuilder().Title(title).Unit(unit).Datasource(datasource()).
		ColorScheme(colorMode(dashboard.FieldColorModeIdThresholds)).Thresholds(scale("green")).
		ReduceOptions(reduceLast()).Orientation(common.VizOrientationHorizontal).
		DisplayMode(common.BarGaugeDisplayModeGradient).ValueMode(common.BarGaugeValueModeColor).
		NamePlacement(common.BarGaugeNamePlacementAuto).ShowUnfilled(true).Sizing(common.BarGaugeSizingAuto).
		MinVizWidth(8).MinVizHeight(16).MaxVizHeight(300)
	for _, q := range targets(qs) {
		p.WithTarget(q)
	}
	return p
}

// columns says how a table shows its columns: pairs of (label or "Value #X", header) in
// the order shown, and columns to hide. Time is always hidden.
type columns struct {
	pairs  []string
	hidden []string
}

func cols(pairs ...string) columns { return columns{pairs: pairs} }

func (c columns) hiding(names ...string) columns {
	c.hidden = append(c.hidden, names...)
	return c
}

// organize is the table's "organize fields" transformation for these columns.
func (c columns) organize() dashboard.DataTransformerConfig {
	exclude := map[string]any{"Time": true}
	for _, h := range c.hidden {
		exclude[h] = true
	}
	rename, index := map[string]any{}, map[string]any{}
	for i := 0; i+1 < len(c.pairs); i += 2 {
		rename[c.pairs[i]] = c.pairs[i+1]
		index[c.pairs[i]] = i / 2
	}
	return dashboard.DataTransformerConfig{Id: "organize", Options: map[string]any{
		"excludeByName": exclude, "indexByName": index, "renameByName": rename,
	}}
}

// tablePanel is a table over instant table queries. Several queries are merged into one
// row per label set (their values become the columns "Value #A", "Value #B", ...).
func tablePanel(title, unit string, c columns, qs ...*prometheus.DataqueryBuilder) *table.PanelBuilder {
	p := table.NewPanelBuilder().Title(title).Unit(unit).Datasource(datasource()).
		ColorScheme(colorMode(dashboard.FieldColorModeIdThresholds)).Thresholds(scale("green")).
		Align(common.FieldTextAlignmentAuto).CellOptions(cell("auto")).Inspect(false).Filterable(true).
		ShowHeader(true).CellHeight(common.TableCellHeightSm).
		Footer(common.NewTableFooterOptionsBuilder().Show(false).Reducer([]string{"sum"}).CountRows(false).Fields([]string{}))
	for _, q := range targets(qs) {
		p.WithTarget(q)
	}
	if len(qs) > 1 {
		p.WithTransformation(dashboard.DataTransformerConfig{Id: "merge", Options: map[string]any{}})
	}
	return p.WithTransformation(c.organize())
}

// cell is a table cell display ("auto", "color-text", "color-background", "gauge").
func cell(typ string) common.TableCellOptions {
	switch typ {
	case "color-text":
		return common.TableCellOptions{TableColorTextCellOptions: &common.TableColorTextCellOptions{Type: common.TableCellDisplayMode(typ)}}
	case "auto":
		return common.TableCellOptions{TableAutoCellOptions: &common.TableAutoCellOptions{Type: common.TableCellDisplayMode(typ)}}
	}
	panic(fmt.Sprintf("dashboards: cell type %q", typ))
}

// heatmapPanel shows series as rows of cells over time (calculate off: each series is a
// row, named by its legend), coloured by value; a ratio's colours span 0 to 1.
func heatmapPanel(title, unit string, qs ...*prometheus.DataqueryBuilder) *heatmap.PanelBuilder {
	colors := heatmap.NewHeatmapColorOptionsBuilder().Mode(heatmap.HeatmapColorModeScheme).Scheme("Turbo").
		Fill("dark-orange").Scale(heatmap.HeatmapColorScaleLinear).Exponent(0.5).Steps(64).Reverse(false)
	if unit == units.PercentUnit {
		colors.Min(0).Max(1)
	}
	p := heatmap.NewPanelBuilder().Title(title).Unit(unit).Datasource(datasource()).
		ColorScheme(colorMode(dashboard.FieldColorModeIdPaletteClassic)).Thresholds(scale("green")).
		HideFrom(common.NewHideSeriesConfigBuilder().Legend(false).Tooltip(false).Viz(false)).
		ScaleDistribution(common.NewScaleDistributionConfigBuilder().Type(common.ScaleDistributionLinear)).
		Calculate(false).CellGap(1).CellValues(heatmap.NewCellValuesBuilder().Unit(unit)).Color(colors).
		ExemplarsColor("rgba(255,0,255,0.7)").FilterValues(heatmap.NewFilterValueRangeBuilder().Le(-1e-9)).
		ShowLegend().RowsFrame(heatmap.NewRowsHeatmapOptionsBuilder().Layout(common.HeatmapCellLayoutAuto)).
		ShowValue(common.VisibilityModeNever).
		Tooltip(heatmap.NewHeatmapTooltipBuilder().Mode(common.TooltipDisplayModeSingle).YHistogram(false).ShowColorScale(false)).
		YAxis(heatmap.NewYAxisConfigBuilder().AxisPlacement(common.AxisPlacementLeft).Reverse(true))
	for _, q := range targets(qs) {
		p.WithTarget(q)
	}
	return p
}

// Field override properties.

func unitProp(u string) dashboard.DynamicConfigValue { return prop("unit", u) }

func minProp(v float64) dashboard.DynamicConfigValue { return prop("min", v) }

func maxProp(v float64) dashboard.DynamicConfigValue { return prop("max", v) }

func prop(id string, v any) dashboard.DynamicConfigValue {
	return dashboard.DynamicConfigValue{Id: id, Value: v}
}

// ratioGauge draws a 0–1 table column as a gauge coloured by t.
func ratioGauge(t thresholdScale) []dashboard.DynamicConfigValue {
	return props(unitProp(units.PercentUnit), cellGauge(), minProp(0), maxProp(1), thresholdsProp(t))
}

// dashed draws a field as a dashed line without fill.
func dashed(more ...dashboard.DynamicConfigValue) []dashboard.DynamicConfigValue {
	return append([]dashboard.DynamicConfigValue{
		prop("custom.lineStyle", map[string]any{"fill": "dash", "dash": []any{10, 10}}),
		prop("custom.fillOpacity", 0),
	}, more...)
}

func fixedColor(c string) dashboard.DynamicConfigValue {
	return prop("color", map[string]any{"mode": "fixed", "fixedColor": c})
}

func thresholdsProp(t thresholdScale) dashboard.DynamicConfigValue { return prop("thresholds", t.v) }

func props(p ...dashboard.DynamicConfigValue) []dashboard.DynamicConfigValue { return p }

// cellBackground colours table cells' backgrounds by thresholds or mappings.
func cellBackground() dashboard.DynamicConfigValue {
	return prop("custom.cellOptions", map[string]any{"type": "color-background"})
}

// cellGauge draws table cells as gauges.
func cellGauge() dashboard.DynamicConfigValue {
	return prop("custom.cellOptions", map[string]any{"type": "gauge", "mode": "basic"})
}
