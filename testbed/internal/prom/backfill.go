package prom

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/snappy"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protowire"
)

// Past data: a scenario whose totals over hours are known, written with explicit past
// timestamps, and the recording rules evaluated over it minute by minute, so that a test
// needs neither hours of wall-clock time nor a rule engine of its own. Prometheus's own
// rule backfiller (`promtool tsdb create-blocks-from rules`) cannot do it: it does not
// evaluate rules that read other rules' results, and the funnel is built of those.

// staleNaN is Prometheus's staleness marker (model/value.StaleNaN).
var staleNaN = math.Float64frombits(0x7ff0000000000002)

// RemoteWrite sends samples with their own timestamps by remote-write 1.0. Prometheus
// takes samples older than its newest by up to an hour, so write in time order.
func (s *Server) RemoteWrite(series []Series) error {
	var req []byte
	for _, ts := range series {
		var m []byte
		names := make([]string, 0, len(ts.Labels))
		for n := range ts.Labels {
			names = append(names, n)
		}
		sort.Strings(names) // remote-write wants labels sorted
		for _, n := range names {
			var l []byte
			l = protowire.AppendTag(l, 1, protowire.BytesType)
			l = protowire.AppendString(l, n)
			l = protowire.AppendTag(l, 2, protowire.BytesType)
			l = protowire.AppendString(l, ts.Labels[n])
			m = protowire.AppendTag(m, 1, protowire.BytesType)
			m = protowire.AppendBytes(m, l)
		}
		for _, p := range ts.Points {
			var smp []byte
			smp = protowire.AppendTag(smp, 1, protowire.Fixed64Type)
			smp = protowire.AppendFixed64(smp, math.Float64bits(p.V))
			smp = protowire.AppendTag(smp, 2, protowire.VarintType)
			smp = protowire.AppendVarint(smp, uint64(p.T.UnixMilli()))
			m = protowire.AppendTag(m, 2, protowire.BytesType)
			m = protowire.AppendBytes(m, smp)
		}
		req = protowire.AppendTag(req, 1, protowire.BytesType)
		req = protowire.AppendBytes(req, m)
	}
	httpReq, err := http.NewRequest(http.MethodPost, s.RemoteWriteURL(), bytes.NewReader(snappy.Encode(nil, req)))
	if err != nil {
		return err
	}
	httpReq.Header.Set("Content-Encoding", "snappy")
	httpReq.Header.Set("Content-Type", "application/x-protobuf")
	httpReq.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	resp, err := http.DefaultClient.Do(httpReq)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		body, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("remote-write: %s: %s", resp.Status, body)
	}
	return nil
}

// QueryAt runs an instant query at a given time; the result must be a vector (a scalar
// becomes a vector of one sample without labels, as rules take it).
func (s *Server) QueryAt(q string, at time.Time) ([]Sample, error) {
	form := url.Values{"query": {q}, "time": {strconv.FormatFloat(float64(at.UnixMilli())/1e3, 'f', -1, 64)}}
	resp, err := http.PostForm("http://"+s.Addr+"/api/v1/query", form)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r apiResponse
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, fmt.Errorf("query %q: %w", q, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %q at %s: %s: %s", q, at.Format(time.RFC3339), r.ErrorType, r.Error)
	}
	if r.Data.ResultType == "scalar" && len(r.Data.Result) == 2 { // [time, "value"]
		var v string
		if err := json.Unmarshal(r.Data.Result[1], &v); err != nil {
			return nil, err
		}
		f, err := strconv.ParseFloat(v, 64)
		return []Sample{{Labels: map[string]string{}, Value: f}}, err
	}
	return vector(q, &r)
}

func vector(q string, r *apiResponse) ([]Sample, error) {
	if r.Data.ResultType != "vector" {
		return nil, fmt.Errorf("query %q: result is a %s, not a vector", q, r.Data.ResultType)
	}
	out := make([]Sample, 0, len(r.Data.Result))
	for _, raw := range r.Data.Result {
		var v struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, err
		}
		f, err := parseValue(v.Value[1])
		if err != nil {
			return nil, err
		}
		out = append(out, Sample{Labels: v.Metric, Value: f})
	}
	return out, nil
}

// RuleEvaluator evaluates recording rules as Prometheus's rule manager does — each group
// in turn, each rule reading the results its group wrote before it, a staleness marker
// for a series a rule stops returning — but at the times it is given, through this
// server's query API, writing the results back by remote-write.
type RuleEvaluator struct {
	s      *Server
	groups []ruleGroup
	// last holds, per rule, the series it wrote at its previous evaluation.
	last map[string]map[string]map[string]string
}

type ruleGroup struct {
	Name     string `yaml:"name"`
	Interval string `yaml:"interval"`
	Rules    []struct {
		Record string            `yaml:"record"`
		Alert  string            `yaml:"alert"`
		Expr   string            `yaml:"expr"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"rules"`
	every time.Duration
}

// Rules loads the named groups of rule files (every group when none is named), in the
// files' order. Alerting rules are left out. interval is the global evaluation interval.
func (s *Server) Rules(files []string, interval time.Duration, groups ...string) (*RuleEvaluator, error) {
	want := map[string]bool{}
	for _, g := range groups {
		want[g] = true
	}
	e := &RuleEvaluator{s: s, last: map[string]map[string]map[string]string{}}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var doc struct {
			Groups []ruleGroup `yaml:"groups"`
		}
		if err := yaml.Unmarshal(data, &doc); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, g := range doc.Groups {
			if len(want) > 0 && !want[g.Name] {
				continue
			}
			delete(want, g.Name)
			g.every = interval
			if g.Interval != "" {
				if g.every, err = time.ParseDuration(g.Interval); err != nil {
					return nil, fmt.Errorf("%s: group %s: %w", f, g.Name, err)
				}
			}
			e.groups = append(e.groups, g)
		}
	}
	for g := range want {
		return nil, fmt.Errorf("no rule group %q in %v", g, files)
	}
	return e, nil
}

// EvalAt evaluates, at ts, every group whose interval ts falls on.
func (e *RuleEvaluator) EvalAt(ts time.Time) error {
	for _, g := range e.groups {
		if ts.UnixMilli()%g.every.Milliseconds() != 0 {
			continue
		}
		for i, r := range g.Rules {
			if r.Record == "" {
				continue
			}
			samples, err := e.s.QueryAt(r.Expr, ts)
			if err != nil {
				return fmt.Errorf("group %s, rule %s: %w", g.Name, r.Record, err)
			}
			id := g.Name + "/" + strconv.Itoa(i)
			now := map[string]map[string]string{}
			var out []Series
			for _, smp := range samples {
				labels := map[string]string{}
				for k, v := range smp.Labels {
					labels[k] = v
				}
				for k, v := range r.Labels {
					labels[k] = v
				}
				labels["__name__"] = r.Record
				key := seriesKey(labels)
				if now[key] != nil {
					return fmt.Errorf("group %s, rule %s at %s: vector contains metrics with the same labelset after applying rule labels", g.Name, r.Record, ts.Format(time.RFC3339))
				}
				now[key] = labels
				out = append(out, Series{Labels: labels, Points: []Point{{T: ts, V: smp.Value}}})
			}
			for key, labels := range e.last[id] {
				if now[key] == nil {
					out = append(out, Series{Labels: labels, Points: []Point{{T: ts, V: staleNaN}}})
				}
			}
			e.last[id] = now
			if len(out) > 0 {
				if err := e.s.RemoteWrite(out); err != nil {
					return fmt.Errorf("group %s, rule %s: %w", g.Name, r.Record, err)
				}
			}
		}
	}
	return nil
}

func seriesKey(labels map[string]string) string {
	names := make([]string, 0, len(labels))
	for n := range labels {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		b.WriteString(n)
		b.WriteByte(0xff)
		b.WriteString(labels[n])
		b.WriteByte(0xfe)
	}
	return b.String()
}
