//go:build e2e

package testbed

import (
	"errors"
	"fmt"
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

	var last string
	prom.Eventually(t, 90*time.Second, "identical series on both paths", func() error {
		a, err := seriesOf(rw, "otlp-same")
		if err != nil {
			return fmt.Errorf("remote-write: %w", err)
		}
		b, err := seriesOf(otlp, "otlp-same")
		if err != nil {
			return fmt.Errorf("OTLP: %w", err)
		}
		if len(a) < 100 {
			return fmt.Errorf("only %d series by remote-write so far", len(a))
		}
		if slices.Equal(a, b) {
			last = fmt.Sprintf("%d series", len(a))
			return nil
		}
		return fmt.Errorf("remote-write has %d series, OTLP %d; only by remote-write:\n  %s\nonly by OTLP:\n  %s",
			len(a), len(b), strings.Join(firstN(minus(a, b), 5), "\n  "), strings.Join(firstN(minus(b, a), 5), "\n  "))
	})
	t.Logf("identical: %s", last)
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
