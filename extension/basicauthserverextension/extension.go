package basicauthserverextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/basicauthserverextension"

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/extensionauth"
	"golang.org/x/crypto/bcrypt"
)

var errUnauthorized = errors.New("basic authentication: missing or wrong credentials")

// authenticator checks the Authorization header of every request against the users.
type authenticator struct {
	cfg   *Config
	users map[string][]byte
	// unknownUser is compared against when the user is not known, so that an unknown user
	// takes as long as a wrong password and names cannot be told apart by timing.
	unknownUser []byte
}

var _ extensionauth.Server = (*authenticator)(nil)

// Start loads the users (the file is read here, so a Secret mounted late is found).
func (a *authenticator) Start(context.Context, component.Host) error {
	users, err := a.cfg.loadUsers()
	if err != nil {
		return err
	}
	if len(users) == 0 {
		return errors.New("htpasswd_file: no user in it")
	}
	a.unknownUser, err = bcrypt.GenerateFromPassword([]byte("no such user"), bcrypt.DefaultCost)
	if err != nil {
		return err
	}
	a.users = users
	return nil
}

// Shutdown has nothing to release.
func (a *authenticator) Shutdown(context.Context) error { return nil }

// Authenticate accepts a request whose Authorization header carries a known user and its
// password. HTTP servers pass the header as "Authorization", gRPC as "authorization".
func (a *authenticator) Authenticate(ctx context.Context, sources map[string][]string) (context.Context, error) {
	header := first(sources, "Authorization", "authorization")
	scheme, encoded, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return ctx, errUnauthorized
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(encoded))
	if err != nil {
		return ctx, errUnauthorized
	}
	user, password, ok := strings.Cut(string(raw), ":")
	if !ok {
		return ctx, errUnauthorized
	}
	hash, known := a.users[user]
	if !known {
		_ = bcrypt.CompareHashAndPassword(a.unknownUser, []byte(password))
		return ctx, errUnauthorized
	}
	if bcrypt.CompareHashAndPassword(hash, []byte(password)) != nil {
		return ctx, errUnauthorized
	}
	return ctx, nil
}

func first(sources map[string][]string, keys ...string) string {
	for _, k := range keys {
		if v := sources[k]; len(v) > 0 {
			return v[0]
		}
	}
	return ""
}
