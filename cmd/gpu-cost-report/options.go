package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/prometheus/common/config"

	"github.com/otelcol-gpu/otelcol-gpu/converter/credentialsguard"
)

// Environment variables: credentials that may come from the environment instead of a
// file (never from a flag: flags show in ps and shell history).
const (
	envBearerToken = "GPU_COST_REPORT_BEARER_TOKEN"
	envPassword    = "GPU_COST_REPORT_PASSWORD"
)

// options is what the command line asks for.
type options struct {
	Prometheus string
	Start, End time.Time
	// EndClamped is set when --end was in the future and the period now ends at the
	// current minute.
	EndClamped   bool
	Levels       []string // namespace, workload, job: the row levels, in this order
	Format       string   // csv or json
	Out          string   // file, or "-" for stdout
	Span         time.Duration
	Timeout      time.Duration
	Parallel     int
	AllowPartial bool
	HTTP         config.HTTPClientConfig
}

var allLevels = []string{levelNamespace, levelWorkload, levelJob}

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ", ") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// parseOptions reads the command line; now is the current time (the default period is
// the previous calendar month, UTC).
func parseOptions(args []string, getenv func(string) string, now time.Time, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("gpu-cost-report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	var (
		o                                       options
		start, end, month, by                   string
		caFile, certFile, keyFile, serverName   string
		insecure                                bool
		bearerFile, user, passwordFile, httpCfg string
		headers                                 stringList
	)
	fs.StringVar(&o.Prometheus, "prometheus", "http://127.0.0.1:9090", "Prometheus (or Mimir, Thanos: anything that serves Prometheus's query API) base URL, e.g. https://prometheus.example:9090 or https://mimir.example/prometheus")
	fs.StringVar(&start, "start", "", "first instant of the period: RFC3339 (2026-11-01T00:00:00Z), a date (2026-11-01, UTC midnight) or 2026-11-01T08:00 (UTC); default: the start of the previous calendar month, UTC")
	fs.StringVar(&end, "end", "", "end of the period, excluded, in the same forms; default: the end of the previous calendar month, or now with --start")
	fs.StringVar(&month, "month", "", "a calendar month, UTC (2026-11), instead of --start and --end")
	fs.StringVar(&by, "by", "all", "rows per namespace, workload, job (Slurm), or all three in one file (the level column tells them apart); a comma-separated list works too")
	fs.StringVar(&o.Format, "format", "csv", "csv or json")
	fs.StringVar(&o.Out, "out", "-", "file to write (replaced only once the report is complete); - for standard output")
	fs.DurationVar(&o.Span, "query-span", 24*time.Hour, "the period is queried this much at a time; smaller spans keep each query under Prometheus's sample limit on a large fleet (a whole number of minutes)")
	fs.DurationVar(&o.Timeout, "timeout", 2*time.Minute, "time limit of each query")
	fs.IntVar(&o.Parallel, "parallel", 4, "queries at once")
	fs.BoolVar(&o.AllowPartial, "allow-partial", false, "write the report even when Prometheus says its answer is partial (a warning in the query response, e.g. a Thanos store down); the warnings go to standard error")
	fs.StringVar(&caFile, "ca-file", "", "CA certificate(s) to verify Prometheus's server certificate with (default: the system's)")
	fs.StringVar(&certFile, "cert-file", "", "client certificate, for mutual TLS (with --key-file)")
	fs.StringVar(&keyFile, "key-file", "", "client certificate's private key")
	fs.StringVar(&serverName, "server-name", "", "name to verify the server certificate against, when it differs from the URL's host")
	fs.BoolVar(&insecure, "insecure-skip-verify", false, "do not verify the server certificate (refused with credentials)")
	fs.StringVar(&bearerFile, "bearer-token-file", "", "file holding a bearer token (or set "+envBearerToken+")")
	fs.StringVar(&user, "basic-auth-user", "", "basic auth user name; the password from --basic-auth-password-file or "+envPassword)
	fs.StringVar(&passwordFile, "basic-auth-password-file", "", "file holding the basic auth password")
	fs.Var(&headers, "header", "extra request header 'Name: value', repeatable (e.g. 'X-Scope-OrgID: team-a' for a Mimir tenant); credential headers are refused here: use a token or password file")
	fs.StringVar(&httpCfg, "http-config", "", "a Prometheus HTTP client configuration file (promtool's --http.config.file: tls_config, basic_auth, authorization, oauth2, proxy_url, http_headers), instead of the TLS and auth flags above")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}

	var err error
	if o.Start, o.End, o.EndClamped, err = period(start, end, month, now); err != nil {
		return o, err
	}
	if o.Levels, err = parseLevels(by); err != nil {
		return o, err
	}
	if o.Format != "csv" && o.Format != "json" {
		return o, fmt.Errorf("--format %q: want csv or json", o.Format)
	}
	if o.Span < time.Minute || o.Span%time.Minute != 0 {
		return o, fmt.Errorf("--query-span %s: want a whole number of minutes", o.Span)
	}
	if o.Timeout <= 0 || o.Parallel < 1 {
		return o, errors.New("--timeout and --parallel must be positive")
	}

	if httpCfg != "" {
		if caFile != "" || certFile != "" || keyFile != "" || serverName != "" || insecure || bearerFile != "" || user != "" || passwordFile != "" || len(headers) > 0 ||
			getenv(envBearerToken) != "" || getenv(envPassword) != "" {
			return o, errors.New("--http-config replaces the TLS, auth and header flags (and " + envBearerToken + ", " + envPassword + "): use one or the other")
		}
		cfg, _, err := config.LoadHTTPConfigFile(httpCfg)
		if err != nil {
			return o, fmt.Errorf("--http-config: %w", err)
		}
		o.HTTP = *cfg
	} else {
		o.HTTP = config.HTTPClientConfig{
			FollowRedirects: true,
			EnableHTTP2:     true,
			TLSConfig: config.TLSConfig{
				CAFile: caFile, CertFile: certFile, KeyFile: keyFile,
				ServerName: serverName, InsecureSkipVerify: insecure,
			},
			ProxyConfig: config.ProxyConfig{ProxyFromEnvironment: true},
		}
		token := getenv(envBearerToken)
		switch {
		case bearerFile != "" && token != "":
			return o, errors.New("--bearer-token-file and " + envBearerToken + ": set one")
		case bearerFile != "":
			o.HTTP.Authorization = &config.Authorization{Type: "Bearer", CredentialsFile: bearerFile}
		case token != "":
			o.HTTP.Authorization = &config.Authorization{Type: "Bearer", Credentials: config.Secret(token)}
		}
		password := getenv(envPassword)
		switch {
		case user == "" && (passwordFile != "" || password != ""):
			return o, errors.New("a basic auth password without --basic-auth-user")
		case user != "" && o.HTTP.Authorization != nil:
			return o, errors.New("basic auth and a bearer token: set one")
		case user != "" && passwordFile != "" && password != "":
			return o, errors.New("--basic-auth-password-file and " + envPassword + ": set one")
		case user != "" && passwordFile == "" && password == "":
			return o, errors.New("--basic-auth-user needs --basic-auth-password-file or " + envPassword + " (a password is never given as a flag)")
		case user != "":
			o.HTTP.BasicAuth = &config.BasicAuth{Username: user, PasswordFile: passwordFile, Password: config.Secret(password)}
		}
		if (certFile == "") != (keyFile == "") {
			return o, errors.New("--cert-file and --key-file go together")
		}
		if len(headers) > 0 {
			o.HTTP.HTTPHeaders = &config.Headers{Headers: map[string]config.Header{}}
			for _, h := range headers {
				name, value, ok := strings.Cut(h, ":")
				name, value = strings.TrimSpace(name), strings.TrimSpace(value)
				if !ok || name == "" {
					return o, fmt.Errorf("--header %q: want 'Name: value'", h)
				}
				if credentialsguard.IsSecretName(name) {
					// Never repeat the value.
					return o, fmt.Errorf("--header %s carries a credential: a flag shows in ps and shell history; use --bearer-token-file, --basic-auth-password-file or --http-config (http_headers with files)", name)
				}
				name = http.CanonicalHeaderKey(name)
				hv := o.HTTP.HTTPHeaders.Headers[name]
				hv.Values = append(hv.Values, value)
				o.HTTP.HTTPHeaders.Headers[name] = hv
			}
		}
	}
	if err := o.HTTP.Validate(); err != nil {
		return o, fmt.Errorf("HTTP client: %w", err)
	}
	if err := checkEndpoint(o.Prometheus, o.HTTP, getenv(credentialsguard.AllowPlaintextEnv) == "true"); err != nil {
		return o, err
	}
	return o, nil
}

const usage = `gpu-cost-report: GPU-hours, energy and cost per namespace, workload and Slurm job over a
period, from otelcol-gpu's recording rules in Prometheus, as CSV or JSON.

  gpu-cost-report --prometheus https://prometheus.example:9090 --month 2026-11 > 2026-11.csv

Exit status: 0 written (warnings, if any, on standard error), 1 no report (Prometheus
unreachable, a query failed, a partial answer, no data for the period), 2 bad usage.

`

// checkEndpoint follows converter/credentialsguard: no credentials in the URL, none over
// plain text or over TLS that does not verify the server, unless allowPlaintext
// (OTELCOL_GPU_ALLOW_PLAINTEXT_CREDENTIALS=true: loopback, a TLS sidecar).
func checkEndpoint(raw string, cfg config.HTTPClientConfig, allowPlaintext bool) error {
	if why := credentialsguard.URLCredentials(raw); why != "" {
		// Never repeat the URL: it holds the secret.
		return fmt.Errorf("--prometheus %s: it would show in ps, shell history and error messages; use --basic-auth-user with a password file, or a token file", why)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--prometheus %q: want an http:// or https:// URL", raw)
	}
	if !authenticates(cfg) || allowPlaintext {
		return nil
	}
	switch {
	case u.Scheme == "http":
		return fmt.Errorf("credentials would cross the network in plain text to %s: use https://, or set %s=true where the path cannot be read (loopback, a TLS sidecar)", u.Host, credentialsguard.AllowPlaintextEnv)
	case cfg.TLSConfig.InsecureSkipVerify:
		return fmt.Errorf("credentials over TLS that does not verify %s (--insecure-skip-verify): anyone in the path can pose as it and read them; give its CA (--ca-file), or set %s=true where the path cannot be read", u.Host, credentialsguard.AllowPlaintextEnv)
	}
	return nil
}

// authenticates says whether the client sends a credential: a client certificate does
// not count (its key never leaves this machine).
func authenticates(cfg config.HTTPClientConfig) bool {
	if cfg.BasicAuth != nil || cfg.Authorization != nil || cfg.OAuth2 != nil || cfg.BearerToken != "" || cfg.BearerTokenFile != "" {
		return true
	}
	if cfg.HTTPHeaders != nil {
		for name := range cfg.HTTPHeaders.Headers {
			if credentialsguard.IsSecretName(name) {
				return true
			}
		}
	}
	return false
}

func parseLevels(by string) ([]string, error) {
	if by == "all" {
		return allLevels, nil
	}
	want := map[string]bool{}
	for _, l := range strings.Split(by, ",") {
		l = strings.TrimSpace(l)
		if l != levelNamespace && l != levelWorkload && l != levelJob {
			return nil, fmt.Errorf("--by %q: want namespace, workload, job or all", by)
		}
		want[l] = true
	}
	var out []string
	for _, l := range allLevels {
		if want[l] {
			out = append(out, l)
		}
	}
	return out, nil
}

// period returns [start, end): the flags', or the previous calendar month (UTC). An end
// in the future becomes the current minute (clamped true).
func period(start, end, month string, now time.Time) (s, e time.Time, clamped bool, err error) {
	now = now.UTC()
	switch {
	case month != "" && (start != "" || end != ""):
		return s, e, false, errors.New("--month replaces --start and --end")
	case month != "":
		m, err := time.Parse("2006-01", month)
		if err != nil {
			return s, e, false, fmt.Errorf("--month %q: want YYYY-MM", month)
		}
		s, e = m, m.AddDate(0, 1, 0)
	case start == "" && end != "":
		return s, e, false, errors.New("--end without --start")
	case start == "":
		e = time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
		s = e.AddDate(0, -1, 0)
	default:
		if s, err = parseTime(start); err != nil {
			return s, e, false, fmt.Errorf("--start: %w", err)
		}
		if end == "" {
			e = now.Truncate(time.Minute)
		} else if e, err = parseTime(end); err != nil {
			return s, e, false, fmt.Errorf("--end: %w", err)
		}
	}
	if s.Truncate(time.Minute) != s || e.Truncate(time.Minute) != e {
		// The rules integrate GPU shares once a minute: a period is whole minutes.
		return s, e, false, fmt.Errorf("the period %s to %s must start and end on a whole minute", s.Format(time.RFC3339), e.Format(time.RFC3339))
	}
	if last := now.Truncate(time.Minute); e.After(last) {
		e, clamped = last, true
	}
	if !e.After(s) {
		return s, e, false, fmt.Errorf("the period %s to %s is empty (it must start before it ends, and before now)", s.Format(time.RFC3339), e.Format(time.RFC3339))
	}
	return s.UTC(), e.UTC(), clamped, nil
}

// parseTime reads RFC3339, a date (UTC midnight) or a date and time without a zone (UTC).
func parseTime(v string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04Z07:00", "2006-01-02", "2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02 15:04"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q: want RFC3339 (2026-11-01T00:00:00Z), a date (2026-11-01) or 2026-11-01T08:00 (UTC)", v)
}

// openOut returns where the report goes; commit makes it visible (a file is written to a
// temporary name and renamed, so a failed run never leaves half a report).
func openOut(path string, stdout io.Writer) (w io.Writer, commit func() error, abort func(), err error) {
	if path == "-" || path == "" {
		return stdout, func() error { return nil }, func() {}, nil
	}
	dir, base := ".", path
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		dir, base = path[:i+1], path[i+1:]
	}
	f, err := os.CreateTemp(dir, "."+base+".*")
	if err != nil {
		return nil, nil, nil, err
	}
	commit = func() error {
		if err := f.Close(); err != nil {
			os.Remove(f.Name())
			return err
		}
		if err := os.Chmod(f.Name(), 0o644); err != nil {
			os.Remove(f.Name())
			return err
		}
		return os.Rename(f.Name(), path)
	}
	abort = func() { f.Close(); os.Remove(f.Name()) }
	return f, commit, abort, nil
}
