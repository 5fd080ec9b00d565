//go:build e2e

package testbed

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/proc"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"
)

// otlpOverlay is the shipped overlay, relative to configs/ (startAgentOn's overlay root).
const otlpOverlay = "../deploy/config-overlays/prometheus-otlp.yaml"

// startPrometheusOTLP runs Prometheus 3 with its OTLP receiver on and the shipped `otlp:`
// configuration (deploy/prometheus/otlp.yaml).
func startPrometheusOTLP(t *testing.T) *prom.Server {
	t.Helper()
	otlpCfg, err := os.ReadFile(filepath.Join(proc.RepoRoot(), "deploy", "prometheus", "otlp.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return prom.Start3(t, "global:\n  scrape_interval: 15s\n"+string(otlpCfg), "--web.enable-otlp-receiver")
}

func otlpNode(p *prom.Server, node agentNode) agentNode {
	node.overlays = append(node.overlays, otlpOverlay)
	node.env = append(node.env, "PROMETHEUS_OTLP_URL=http://"+p.Addr+"/api/v1/otlp/v1/metrics")
	return node
}

// seriesOf is every series of host in p, each as its sorted label set.
func seriesOf(p *prom.Server, host string) ([]string, error) {
	named, err := p.Query(fmt.Sprintf(`{host_name=%q}`, host))
	if err != nil {
		return nil, err
	}
	if len(named) == 0 {
		return nil, errors.New("no series")
	}
	var out []string
	for _, x := range named {
		var kv []string
		for k, v := range x.Labels {
			kv = append(kv, k+"="+v)
		}
		sort.Strings(kv)
		out = append(out, strings.Join(kv, ","))
	}
	sort.Strings(out)
	return out, nil
}

// eventuallySameSeries waits until two Prometheus servers, fed the same node by two
// agents, hold exactly the same series names and label sets for host (at least 100), and
// fails with the differences if that does not happen within 90 s.
func eventuallySameSeries(t *testing.T, host, nameA string, a *prom.Server, nameB string, b *prom.Server) {
	t.Helper()
	var last string
	prom.Eventually(t, 90*time.Second, "identical series by "+nameA+" and "+nameB, func() error {
		sa, err := seriesOf(a, host)
		if err != nil {
			return fmt.Errorf("%s: %w", nameA, err)
		}
		sb, err := seriesOf(b, host)
		if err != nil {
			return fmt.Errorf("%s: %w", nameB, err)
		}
		if len(sa) < 100 {
			return fmt.Errorf("only %d series by %s so far", len(sa), nameA)
		}
		if slices.Equal(sa, sb) {
			last = fmt.Sprintf("%d series", len(sa))
			return nil
		}
		return fmt.Errorf("%s has %d series, %s %d; only by %s:\n  %s\nonly by %s:\n  %s",
			nameA, len(sa), nameB, len(sb), nameA, strings.Join(firstN(minus(sa, sb), 5), "\n  "), nameB, strings.Join(firstN(minus(sb, sa), 5), "\n  "))
	})
	t.Logf("identical: %s", last)
}

// TestOTLPIntoPrometheus3MatchesRemoteWrite: the shipped OTLP overlay into Prometheus 3 with
// the shipped `otlp:` configuration gives exactly the series names and label sets that
// remote-write gives, so every rule and dashboard works unchanged on either path. Two
// agents on the same simulated node (pods attributed by the kubelet), one per path.
func TestOTLPIntoPrometheus3MatchesRemoteWrite(t *testing.T) {
	rw := prom.Start3(t, "")
	otlp := startPrometheusOTLP(t)
	uuids := simulatedUUIDs(t, "dgxh200")
	startAgentOn(t, rw, "otlp-same", "dgxh200", "shared-gpu", fakeNode(t, uuids))
	startAgentOn(t, otlp, "otlp-same", "dgxh200", "shared-gpu", otlpNode(otlp, fakeNode(t, uuids)))

	eventuallySameSeries(t, "otlp-same", "remote-write", rw, "OTLP", otlp)
}

// TestOTLPDescriptionsAreNotShownByPrometheus3: the OTLP overlay leaves the metrics'
// descriptions out (gpu_enrich::descriptions: false) because Prometheus 3 shows none of
// what OTLP sends of them: its metadata API, where Grafana finds a metric's help, holds
// only what it scraped. Here an agent sends them (descriptions: true) into the shipped
// OTLP set-up; the series land, their help does not, while a scraped metric's does.
func TestOTLPDescriptionsAreNotShownByPrometheus3(t *testing.T) {
	scraped := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "# HELP scraped_probe A scraped metric's help.\n# TYPE scraped_probe gauge\nscraped_probe 1\n")
	}))
	defer scraped.Close()
	otlpCfg, err := os.ReadFile(filepath.Join(proc.RepoRoot(), "deploy", "prometheus", "otlp.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := prom.Start3(t, fmt.Sprintf("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: probe\n    static_configs: [{targets: [%q]}]\n%s",
		strings.TrimPrefix(scraped.URL, "http://"), otlpCfg), "--web.enable-otlp-receiver")
	node := otlpNode(p, agentNode{})
	node.sets = append(node.sets, "processors::gpu_enrich::descriptions=true")
	startAgentOn(t, p, "otlp-help", "dgxh100", "steady-training", node)

	prom.Eventually(t, 60*time.Second, "the OTLP series and the scraped help", func() error {
		s, err := p.Query(`hw_gpu_utilization_ratio{host_name="otlp-help"}`)
		if err != nil || len(s) == 0 {
			return fmt.Errorf("no OTLP series yet: %v", err)
		}
		md, err := p.Metadata()
		if err != nil {
			return err
		}
		if m := md["scraped_probe"]; len(m) == 0 || m[0].Help != "A scraped metric's help." {
			return fmt.Errorf("the scraped metric's help is not shown yet: %v", m)
		}
		return nil
	})
	md, err := p.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range md {
		if strings.HasPrefix(name, "hw_") || strings.HasPrefix(name, "nvidia_") {
			t.Errorf("Prometheus shows the help of %s, which came by OTLP: %v (then the overlay should keep descriptions)", name, m)
		}
	}
}

// TestOTLPRefusedByPrometheusIsLoggedAndSurvived: a Prometheus 3 without its OTLP receiver
// (the flag forgotten) answers 404; the agent says so in its log, drops the batch and
// keeps running.
func TestOTLPRefusedByPrometheusIsLoggedAndSurvived(t *testing.T) {
	p := prom.Start3(t, "") // no --web.enable-otlp-receiver
	agent := startAgentOn(t, p, "otlp-refused", "dgxh100", "steady-training", otlpNode(p, agentNode{}))
	prom.Eventually(t, 60*time.Second, "a log line naming the refusal", func() error {
		out := agent.Output()
		if !strings.Contains(out, "Dropping data") || !strings.Contains(out, "404") {
			return errors.New("no 'Dropping data' with the 404 in the agent's log")
		}
		return nil
	})
	time.Sleep(3 * time.Second)
	if exited, err := agent.Exited(); exited {
		t.Fatalf("agent exited: %v", err)
	}
}

func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if _, found := slices.BinarySearch(b, x); !found {
			out = append(out, x)
		}
	}
	return out
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("… %d more", len(s)-n))
	}
	return s
}
