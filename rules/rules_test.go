package rules

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/otelcol-gpu/otelcol-gpu/internal/contract"
	"github.com/otelcol-gpu/otelcol-gpu/internal/gentest"
	"github.com/otelcol-gpu/otelcol-gpu/internal/promql"
)

func TestCommittedFilesAreGenerated(t *testing.T) {
	gentest.Committed(t, ".", "*.yaml", Render, "make generate")
}

// TestEveryAlertHasARunbookSection: runbook_url points at the alert's section.
func TestEveryAlertHasARunbookSection(t *testing.T) {
	raw, err := os.ReadFile("runbook.md")
	require.NoError(t, err)
	sections := regexp.MustCompile(`(?m)^## (\w+)$`).FindAllStringSubmatch(string(raw), -1)
	have := map[string]bool{}
	for _, s := range sections {
		have[s[1]] = true
	}
	seen := map[string]bool{}
	for _, r := range All() {
		name := r.Alert + r.Record
		assert.False(t, seen[name], "%s defined twice", name)
		seen[name] = true
		_, err := promql.Parse(r.Expr)
		assert.NoError(t, err, name)
		if r.Alert != "" {
			assert.True(t, have[r.Alert], "runbook.md has no section ## %s", r.Alert)
		}
	}
}

func TestRuleNeedsAlertOrRecordAndAnnotations(t *testing.T) {
	for _, r := range []Rule{
		{Expr: "up"},
		{Alert: "A", Record: "b", Expr: "up"},
		{Record: "b"},
		{Alert: "A", Expr: "up", Severity: "warning", Summary: "s"},
	} {
		_, err := File{Groups: []Group{{Name: "g", Rules: []Rule{r}}}}.YAML()
		assert.Error(t, err, "%+v", r)
	}
}

// TestFoldKeepsTheValue: the folded annotations read back as written, whatever spaces and
// template actions they hold.
func TestFoldKeepsTheValue(t *testing.T) {
	long := strings.Repeat("word ", 30)
	for _, text := range []string{
		"short",
		long + "end",
		gpuAt + " is at " + valueCount + " °C, " + long + "{{ with $labels.x }} in {{ . }}{{ end }} " + long + "end.",
		"two  spaces " + long + "and  more  " + long + "end",
		strings.Repeat("x", 300) + " " + long + "end",
	} {
		data, err := File{Groups: []Group{{Name: "g", Rules: []Rule{{
			Alert: "A", Expr: "up", Severity: "info", Summary: text, Description: text,
		}}}}}.YAML()
		require.NoError(t, err)
		var back struct {
			Groups []struct {
				Rules []struct {
					Annotations map[string]string `yaml:"annotations"`
				} `yaml:"rules"`
			} `yaml:"groups"`
		}
		require.NoError(t, yaml.Unmarshal(data, &back), string(data))
		assert.Equal(t, text, back.Groups[0].Rules[0].Annotations["summary"])
		assert.Equal(t, text, back.Groups[0].Rules[0].Annotations["description"])
		for _, line := range strings.Split(string(data), "\n") {
			if !strings.Contains(line, "{{") && !strings.Contains(line, "xxxx") && !strings.Contains(line, "runbook_url") {
				assert.LessOrEqual(t, len(line), 100, line)
			}
		}
	}
}

// TestRulesReadTheDefaultSet: no rule reads a series the agent leaves out by default
// (the full overlay turns those on), so every alert and recording rule works without it.
func TestRulesReadTheDefaultSet(t *testing.T) {
	def, err := contract.DefaultSet("..")
	require.NoError(t, err)
	for _, r := range All() {
		sels, err := promql.Selectors(r.Expr)
		require.NoError(t, err, r.Expr)
		for _, s := range sels {
			assert.Empty(t, def.Lacks(s), "%s%s reads %s", r.Alert, r.Record, s.Metric)
		}
	}
}

// TestRunbookQueriesSayWhatNeedsTheFullOverlay: a query in the runbook that reads a
// series off by default says "full overlay" on its line, or under a comment line of its
// block that does; every query parses.
func TestRunbookQueriesSayWhatNeedsTheFullOverlay(t *testing.T) {
	def, err := contract.DefaultSet("..")
	require.NoError(t, err)
	raw, err := os.ReadFile("runbook.md")
	require.NoError(t, err)
	blocks := regexp.MustCompile("(?s)```promql\n(.*?)```").FindAllStringSubmatch(string(raw), -1)
	require.NotEmpty(t, blocks)
	queries, optIn := 0, 0
	for _, b := range blocks {
		saidAbove := false
		for _, line := range strings.Split(strings.TrimSpace(b[1]), "\n") {
			if strings.HasPrefix(line, "#") {
				saidAbove = saidAbove || strings.Contains(line, "full overlay")
				continue
			}
			query, comment, _ := strings.Cut(line, "#")
			sels, err := promql.Selectors(query)
			require.NoError(t, err, line)
			queries++
			for _, s := range sels {
				if why := def.Lacks(s); why != "" {
					optIn++
					assert.True(t, saidAbove || strings.Contains(comment, "full overlay"), "runbook: %q reads %s (%s) and does not say it needs the full overlay", line, s.Metric, why)
				}
			}
		}
	}
	assert.Positive(t, queries)
	assert.Positive(t, optIn)
}
