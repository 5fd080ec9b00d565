//go:build e2e

package testbed

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"
)

// rw2Gate is contrib's feature gate for sending Remote-Write 2.0 (alpha at v0.161).
const rw2Gate = "--feature-gates=exporter.prometheusremotewritexporter.enableSendingRW2"

// rw2Node switches the shipped agent's remote-write to 2.0: contrib's feature gate and
// protobuf message.
func rw2Node(node agentNode) agentNode {
	node.flags = append(node.flags, rw2Gate)
	node.sets = append(node.sets, "exporters::prometheus_remote_write::protobuf_message=io.prometheus.write.v2.Request")
	return node
}

// TestRemoteWrite2IntoPrometheus3MatchesRemoteWrite1: contrib's remote-write exporter at our
// release line, switched to Remote-Write 2.0, lands in Prometheus 3 (which accepts both by
// default) with exactly the series names and label sets of 1.0.
func TestRemoteWrite2IntoPrometheus3MatchesRemoteWrite1(t *testing.T) {
	rw1 := prom.Start3(t, "")
	rw2 := prom.Start3(t, "")
	uuids := simulatedUUIDs(t, "dgxh200")
	startAgentOn(t, rw1, "rw2-same", "dgxh200", "shared-gpu", fakeNode(t, uuids))
	startAgentOn(t, rw2, "rw2-same", "dgxh200", "shared-gpu", rw2Node(fakeNode(t, uuids)))

	eventuallySameSeries(t, "rw2-same", "1.0", rw1, "2.0", rw2)
}

// TestRemoteWrite2RefusedByAPrometheusOnlyTaking1: the agent really sends 2.0 — a Prometheus
// 3 that accepts only 1.0 refuses every request (415), stores nothing, and the agent logs
// the refusal and keeps running.
func TestRemoteWrite2RefusedByAPrometheusOnlyTaking1(t *testing.T) {
	p := prom.Start3(t, "", "--web.remote-write-receiver.accepted-protobuf-messages=prometheus.WriteRequest")
	agent := startAgentOn(t, p, "rw2-refused", "dgxh100", "steady-training", rw2Node(agentNode{}))
	prom.Eventually(t, 60*time.Second, "a log line naming the refusal", func() error {
		if out := agent.Output(); !strings.Contains(out, "415") {
			return fmt.Errorf("no 415 in the agent's log")
		}
		return nil
	})
	s, err := p.Query(`count({host_name="rw2-refused"})`)
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 0 {
		t.Errorf("a 1.0-only Prometheus stored %v series sent as 2.0", s[0].Value)
	}
	if exited, err := agent.Exited(); exited {
		t.Fatalf("agent exited: %v", err)
	}
}
