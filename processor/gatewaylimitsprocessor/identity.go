package gatewaylimitsprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/gatewaylimitsprocessor"

import (
	"context"
	"net"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/client"
)

// maxIdentityLength bounds a client's name (it is a label of the refusal counter).
const maxIdentityLength = 128

// identity finds a request's client: an auth attribute, or else the peer's IP address.
type identity struct {
	attribute string   // passed to AuthData.GetAttribute; "" : IP address only
	path      []string // keys into the nested maps of the attribute's value
}

func newIdentity(spec string) identity {
	if spec == "" {
		return identity{}
	}
	parts := strings.Split(spec, "/")
	return identity{attribute: parts[0], path: parts[1:]}
}

// of returns the client that sent the request in ctx.
func (id identity) of(ctx context.Context) string {
	info := client.FromContext(ctx)
	if id.attribute != "" && info.Auth != nil {
		v := info.Auth.GetAttribute(id.attribute)
		for _, key := range id.path {
			m, ok := v.(map[string]any)
			if !ok {
				v = nil
				break
			}
			v = m[key]
		}
		if s := scalar(v); s != "" {
			if len(s) > maxIdentityLength {
				s = s[:maxIdentityLength]
			}
			return s
		}
	}
	return hostOf(info.Addr)
}

// scalar is a claim's value as a name: strings as they are, numbers (JSON decodes them as
// float64) written out; anything else names nobody.
func scalar(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case int64:
		return strconv.FormatInt(v, 10)
	case int:
		return strconv.Itoa(v)
	}
	return ""
}

// hostOf is the client's address without its port, as the collector's servers record it.
func hostOf(addr net.Addr) string {
	switch a := addr.(type) {
	case nil:
		return "unknown"
	case *net.TCPAddr:
		if a != nil {
			return a.IP.String()
		}
		return "unknown"
	}
	s := addr.String()
	if host, _, err := net.SplitHostPort(s); err == nil {
		return host
	}
	return s
}
