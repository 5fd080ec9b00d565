package depcheck

import (
	"bufio"
	"bytes"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/otelcol-gpu/otelcol-gpu"

// testOnly reports whether an import path is test code of the collector or of contrib,
// or testify.
func testOnly(path string) bool {
	switch {
	case strings.HasPrefix(path, "github.com/stretchr/testify"):
		return true
	case strings.HasPrefix(path, "go.opentelemetry.io/collector/"),
		strings.HasPrefix(path, "github.com/open-telemetry/opentelemetry-collector-contrib/"):
		for _, elem := range strings.Split(path, "/")[1:] {
			if strings.HasSuffix(elem, "test") || elem == "golden" || elem == "testdata" {
				return true
			}
		}
	}
	return false
}

func TestTestOnly(t *testing.T) {
	for _, p := range []string{
		"go.opentelemetry.io/collector/component/componenttest",
		"go.opentelemetry.io/collector/receiver/receivertest",
		"go.opentelemetry.io/collector/processor/processortest",
		"go.opentelemetry.io/collector/consumer/consumertest",
		"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/pmetrictest",
		"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden",
		"github.com/stretchr/testify/require",
	} {
		assert.True(t, testOnly(p), p)
	}
	for _, p := range []string{
		"go.opentelemetry.io/collector/component",
		"go.opentelemetry.io/collector/scraper/scraperhelper",
		"github.com/open-telemetry/opentelemetry-collector-contrib/processor/k8sattributesprocessor",
		module + "/internal/gpusim",
	} {
		assert.False(t, testOnly(p), p)
	}
}

// imports runs `go list` in dir and returns, for each of our packages it lists, their
// non-test imports.
func imports(t *testing.T, dir string, args ...string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}"}, args...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list in %s: %s", dir, stderr.String())
	pkgs := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 0 && strings.HasPrefix(fields[0], module+"/") {
			pkgs[fields[0]] = fields[1:]
		}
	}
	require.NoError(t, sc.Err())
	return pkgs
}

func offenders(pkgs map[string][]string, skip func(pkg string) bool) []string {
	var out []string
	for pkg, imps := range pkgs {
		if skip(pkg) {
			continue
		}
		for _, imp := range imps {
			if testOnly(imp) {
				out = append(out, pkg+" imports "+imp)
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestCollectorLinksNoTestCodeOfOurs: none of our packages that otelcol-gpu or the node
// agent's build otelcol-gpu-agent links imports test code. (The collector's own service
// package links componenttest and friends; that is not ours to change.)
func TestCollectorLinksNoTestCodeOfOurs(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	for _, dist := range []string{"distribution", filepath.Join("distribution", "agent")} {
		pkgs := imports(t, filepath.Join(root, dist), "-deps", ".")
		require.Contains(t, pkgs, module+"/receiver/gpureceiver", "%s links the gpu receiver", dist)
		require.Contains(t, pkgs, module+"/processor/gpuenrichprocessor", "and gpu_enrich")
		assert.Empty(t, offenders(pkgs, func(string) bool { return false }), dist)
	}
}

// TestNoNonTestPackageOfOursImportsTestCode: the same for every package of the module
// (tools like the fake kubelet included), except the testbed's, which exist only for the
// end-to-end tests, and test helpers named like the collector's (internal/gentest), which
// TestCollectorLinksNoTestCodeOfOurs keeps out of the binary.
func TestNoNonTestPackageOfOursImportsTestCode(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	pkgs := imports(t, root, "./...")
	require.Contains(t, pkgs, module+"/internal/gpusim")
	require.Contains(t, pkgs, module+"/cmd/fake-kubelet")
	assert.Empty(t, offenders(pkgs, func(pkg string) bool {
		return strings.HasPrefix(pkg, module+"/testbed") || strings.HasSuffix(pkg, "test")
	}))
}
