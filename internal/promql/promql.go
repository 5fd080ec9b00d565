// Package promql reads what the repository's PromQL selects (dashboard queries and rule
// expressions), with Prometheus's own parser, so that both can be checked against the
// metric contract (internal/contract) and against each other.
//
// Dashboard queries carry Grafana variables. Inside a string ("$node", "$cluster") they are
// only text to the parser and stay as they are; Grafana's interval and range variables,
// which stand where a duration or a number must ([$__rate_interval], $__range_s), are
// replaced by a sample value first. Any other variable outside a string is a parse error.
package promql // import "github.com/otelcol-gpu/otelcol-gpu/internal/promql"

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// Selector is one vector selector of an expression and the metric it selects. A
// selector that names its metrics through a __name__ alternation ({__name__=~"a|b"})
// gives one Selector per name.
type Selector struct {
	Metric   string
	Matchers []*labels.Matcher // __name__ left out
}

// Has reports whether the selector carries exactly this matcher (e.g. cluster=~"$cluster").
func (s Selector) Has(name string, typ labels.MatchType, value string) bool {
	return slices.ContainsFunc(s.Matchers, func(m *labels.Matcher) bool {
		return m.Name == name && m.Type == typ && m.Value == value
	})
}

// grafanaBuiltins are Grafana's variables that stand for a duration or a number.
var grafanaBuiltins = regexp.MustCompile(`\$\{?__(rate_interval|interval_ms|interval|range_ms|range_s|range)\}?`)

// grafanaVariable is any other variable: $name, ${name} or ${name:format}.
var grafanaVariable = regexp.MustCompile(`\$(\w+|\{\w+(:\w+)?\})`)

// Substitute replaces Grafana's interval and range variables by the values they have on a
// dashboard opened over the last 5 minutes at a 15 s resolution: $__range 5m, $__range_s
// 300, $__interval 15s, $__rate_interval 1m (four scrape intervals), and so on.
func Substitute(query string) string {
	return grafanaBuiltins.ReplaceAllStringFunc(query, func(v string) string {
		return map[string]string{
			"rate_interval": "1m", "interval": "15s", "interval_ms": "15000",
			"range": "5m", "range_s": "300", "range_ms": "300000",
		}[grafanaBuiltins.FindStringSubmatch(v)[1]]
	})
}

// OnAll is the query Grafana runs with every template variable set to All (.*), as
// Substitute leaves it otherwise. A regex "$1" (label_replace's) is not a variable.
func OnAll(query string) string {
	return grafanaVariable.ReplaceAllStringFunc(Substitute(query), func(v string) string {
		if _, err := strconv.Atoi(strings.Trim(v, "${}")); err == nil {
			return v
		}
		return ".*"
	})
}

// Parse parses a query, Grafana variables substituted first.
func Parse(query string) (parser.Expr, error) {
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(Substitute(query))
	if err != nil {
		return nil, fmt.Errorf("%q: %w", query, err)
	}
	return expr, nil
}

// Selectors returns the vector selectors of a query, in order of appearance.
func Selectors(query string) ([]Selector, error) {
	expr, err := Parse(query)
	if err != nil {
		return nil, err
	}
	var out []Selector
	var walkErr error
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok || walkErr != nil {
			return nil
		}
		names, err := metricNames(vs)
		if err != nil {
			walkErr = fmt.Errorf("%q: %s: %w", query, vs, err)
			return nil
		}
		var matchers []*labels.Matcher
		for _, m := range vs.LabelMatchers {
			if m.Name != labels.MetricName {
				matchers = append(matchers, m)
			}
		}
		for _, n := range names {
			out = append(out, Selector{Metric: n, Matchers: matchers})
		}
		return nil
	})
	return out, walkErr
}

// MetricNames returns the sorted, distinct metric names a query selects.
func MetricNames(query string) ([]string, error) {
	sels, err := Selectors(query)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range sels {
		names = append(names, s.Metric)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

var metricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)

// metricNames: the selector's name, or the exact names of its __name__ matcher ("a" or
// =~"a|b"). Any other __name__ matcher selects metrics nobody can list, so it is an error.
func metricNames(vs *parser.VectorSelector) ([]string, error) {
	if vs.Name != "" {
		return []string{vs.Name}, nil
	}
	for _, m := range vs.LabelMatchers {
		if m.Name != labels.MetricName {
			continue
		}
		var names []string
		switch m.Type {
		case labels.MatchEqual:
			names = []string{m.Value}
		case labels.MatchRegexp:
			names = strings.Split(m.Value, "|")
		}
		if len(names) == 0 || slices.ContainsFunc(names, func(n string) bool { return !metricName.MatchString(n) }) {
			return nil, fmt.Errorf("__name__%s%q is not a list of metric names", m.Type, m.Value)
		}
		return names, nil
	}
	return nil, fmt.Errorf("selector without a metric name")
}
