// Package authauditextension is the `auth_audit` extension: a server authenticator that
// delegates to another one (contrib's bearertokenauth, oidc, our basic_auth_server) and
// leaves a trace of every request it refuses — a self-metric by reason and a rate-limited
// log line naming the clients. Upstream authenticators and the collector's HTTP and gRPC
// servers refuse silently (a 401 or Unauthenticated to the client, nothing in the
// collector's logs or metrics), so an agent with a stale token, or a scan of the gateway,
// goes unseen. Nothing upstream does this; README.md says more.
package authauditextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/authauditextension"
