// Package drainextension is the `drain` extension: it bounds shutdown. An HTTP exporter
// that retries without a deadline (prometheus_remote_write with retry_on_failure's
// max_elapsed_time 0 and an in-memory queue) drains its whole queue on shutdown, retrying
// each request for as long as the backend is down, so a SIGTERM during an outage never
// ends and the supervisor's SIGKILL drops everything anyway. As the exporter's HTTP client
// middleware, this extension lets requests through until flush_timeout has passed since
// shutdown began (PipelineWatcher.NotReady); then it cancels those in flight and answers
// every request at once with 400, which the exporter does not retry, so its drain ends
// and the collector exits. What it refused is counted (requests, and samples where the
// body is a remote-write request) and logged when the extension shuts down.
package drainextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/drainextension"
