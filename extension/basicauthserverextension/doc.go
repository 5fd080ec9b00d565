// Package basicauthserverextension is the `basic_auth_server` extension: HTTP basic
// authentication for the collector's own servers (e.g. the `prometheus` exporter's
// /metrics endpoint), with bcrypt-hashed passwords as Prometheus's exporter-toolkit web
// configuration (dcgm-exporter's --web-config-file) has them. Contrib's basicauthextension
// cannot be built on this release line here (DESIGN §3).
package basicauthserverextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/basicauthserverextension"
