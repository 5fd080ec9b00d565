package grafana

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLayout(t *testing.T) {
	d := New("uid", "Title", "")
	d.Row("One", false)
	d.Add(8, 4, Stat("a", UnitShort, Instant("x", "")), Stat("b", UnitShort, Instant("x", "")), Stat("c", UnitShort, Instant("x", "")))
	d.Add(12, 6, TimeSeries("d", UnitRatio, Query("x", ""), Query("y", "")))
	d.Row("Two", true)
	d.Add(24, 5, TimeSeries("e", UnitRatio, Query("x", "")))
	d.Row("Three", false)
	d.Add(6, 3, Stat("f", UnitShort, Instant("x", "")))

	ps := d.Panels()
	type pos struct {
		id         int
		title      string
		x, y, w, h int
	}
	var got []pos
	for _, p := range ps {
		got = append(got, pos{p.ID, p.Title, p.GridPos.X, p.GridPos.Y, p.GridPos.W, p.GridPos.H})
		for _, n := range p.Panels {
			got = append(got, pos{n.ID, n.Title, n.GridPos.X, n.GridPos.Y, n.GridPos.W, n.GridPos.H})
		}
	}
	assert.Equal(t, []pos{
		{1, "One", 0, 0, 24, 1},
		{2, "a", 0, 1, 8, 4}, {3, "b", 8, 1, 8, 4}, {4, "c", 16, 1, 8, 4},
		{5, "d", 0, 5, 12, 6},
		{6, "Two", 0, 11, 24, 1},
		{7, "e", 0, 12, 24, 5}, // nested in the collapsed row
		{8, "Three", 0, 12, 24, 1},
		{9, "f", 0, 13, 6, 3},
	}, got)
	assert.Len(t, ps, 8, "e is inside its collapsed row")

	for _, p := range ps {
		assert.Equal(t, Prometheus, p.Datasource)
	}
	assert.Equal(t, "A", ps[4].Targets[0].RefID)
	assert.Equal(t, "B", ps[4].Targets[1].RefID)
	assert.Equal(t, Prometheus, ps[4].Targets[1].Datasource)
}

func TestJSON(t *testing.T) {
	d := New("uid", "Title", "desc", "tag")
	d.Variables = []Variable{DatasourceVariable(), QueryVariable("node", "Node", `label_values(up{a=~"$b"}, host_name)`, true)}
	d.Row("Row", false)
	d.Add(24, 8, TimeSeries("ts", UnitRatio, Query(`a > 0 < 1 and b{x="&"}`, "{{x}}")))
	one, err := d.JSON()
	require.NoError(t, err)
	two, err := d.JSON()
	require.NoError(t, err)
	assert.Equal(t, string(one), string(two), "not deterministic")
	assert.True(t, strings.HasSuffix(string(one), "}\n"))
	assert.Contains(t, string(one), `a > 0 < 1 and b{x=\"&\"}`, "HTML-escaped")

	var m map[string]any
	require.NoError(t, json.Unmarshal(one, &m))
	assert.EqualValues(t, SchemaVersion, m["schemaVersion"])
	assert.Equal(t, "uid", m["uid"])
	row := m["panels"].([]any)[0].(map[string]any)
	assert.Equal(t, []any{}, row["panels"], "an open row has an empty panel list")

	// Keys are sorted at every level.
	var check func(raw json.RawMessage)
	check = func(raw json.RawMessage) {
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		tok, err := dec.Token()
		require.NoError(t, err)
		switch tok {
		case json.Delim('{'):
			prev := ""
			for dec.More() {
				k, err := dec.Token()
				require.NoError(t, err)
				assert.Less(t, prev, k.(string))
				prev = k.(string)
				var v json.RawMessage
				require.NoError(t, dec.Decode(&v))
				check(v)
			}
		case json.Delim('['):
			for dec.More() {
				var v json.RawMessage
				require.NoError(t, dec.Decode(&v))
				check(v)
			}
		}
	}
	check(one)
}

func TestQueryVariable(t *testing.T) {
	v := QueryVariable("gpu", "GPU", "label_values(x, hw_id)", true)
	assert.True(t, v.Multi)
	assert.True(t, v.IncludeAll)
	assert.Equal(t, ".*", v.AllValue)
	assert.Equal(t, &Prometheus, v.Datasource)
	v = QueryVariable("gpu", "GPU", "label_values(x, hw_id)", false)
	assert.False(t, v.IncludeAll)
	assert.Empty(t, v.AllValue)
}

func TestSteps(t *testing.T) {
	th := Steps("green", 1, "orange", 2.5, "red")
	require.Len(t, th.Steps, 3)
	assert.Nil(t, th.Steps[0].Value)
	assert.Equal(t, 1.0, *th.Steps[1].Value)
	assert.Equal(t, 2.5, *th.Steps[2].Value)
	assert.Equal(t, "red", th.Steps[2].Color)
}
