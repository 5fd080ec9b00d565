package basicauthserverextension

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"golang.org/x/crypto/bcrypt"
)

func hash(t *testing.T, password string) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	require.NoError(t, err)
	return string(h)
}

func basic(user, password string) map[string][]string {
	return map[string][]string{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))}}
}

func started(t *testing.T, cfg *Config) *authenticator {
	t.Helper()
	f := NewFactory()
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), cfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, ext.Shutdown(context.Background())) })
	return ext.(*authenticator)
}

// TestAuthenticate: the right user and password pass; a wrong password, an unknown user,
// another scheme, garbage or no header at all are refused. Users come inline and from an
// htpasswd file (comments and blank lines skipped); gRPC's lower-case header works too.
func TestAuthenticate(t *testing.T) {
	file := filepath.Join(t.TempDir(), "htpasswd")
	require.NoError(t, os.WriteFile(file, []byte("# scrapers\n\ngrafana:"+hash(t, "g-pass")+"\n"), 0o600))
	a := started(t, &Config{Users: map[string]configopaque.String{"prometheus": configopaque.String(hash(t, "p-pass"))}, HtpasswdFile: file})
	ctx := context.Background()

	for name, ok := range map[string]struct {
		sources map[string][]string
		ok      bool
	}{
		"inline user":          {basic("prometheus", "p-pass"), true},
		"file user":            {basic("grafana", "g-pass"), true},
		"gRPC metadata":        {map[string][]string{"authorization": basic("grafana", "g-pass")["Authorization"]}, true},
		"wrong password":       {basic("prometheus", "g-pass"), false},
		"unknown user":         {basic("root", "p-pass"), false},
		"empty password":       {basic("prometheus", ""), false},
		"bearer":               {map[string][]string{"Authorization": {"Bearer p-pass"}}, false},
		"not base64":           {map[string][]string{"Authorization": {"Basic %%%"}}, false},
		"no colon":             {map[string][]string{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte("prometheus"))}}, false},
		"no header":            {map[string][]string{}, false},
		"hash as the password": {basic("prometheus", string(a.users["prometheus"])), false},
	} {
		_, err := a.Authenticate(ctx, ok.sources)
		if ok.ok {
			assert.NoError(t, err, name)
		} else {
			assert.ErrorIs(t, err, errUnauthorized, name)
		}
	}
}

// TestConfigErrors: every mistake is reported with its field, at validation (inline users)
// or at start (the file).
func TestConfigErrors(t *testing.T) {
	assert.ErrorContains(t, confmap.Validate(&Config{}), "at least one user")
	err := confmap.Validate(&Config{Users: map[string]configopaque.String{"prometheus": "plain-password", "a:b": configopaque.String(hash(t, "x"))}})
	assert.ErrorContains(t, err, `user "prometheus": not a bcrypt hash`)
	assert.ErrorContains(t, err, `user "a:b"`)

	dir := t.TempDir()
	for content, want := range map[string]string{
		"prometheus\n":        "line 1: want user:hash",
		"prometheus:secret\n": `line 1: user "prometheus": not a bcrypt hash`,
		"# only a comment\n":  "no user in it",
		"prometheus:" + hash(t, "a") + "\nprometheus:" + hash(t, "b") + "\n": `line 2: user "prometheus" is listed twice`,
	} {
		file := filepath.Join(dir, "htpasswd")
		require.NoError(t, os.WriteFile(file, []byte(content), 0o600))
		f := NewFactory()
		ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), &Config{HtpasswdFile: file})
		require.NoError(t, err)
		assert.ErrorContains(t, ext.Start(context.Background(), componenttest.NewNopHost()), want, content)
	}
	f := NewFactory()
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(f.Type()), &Config{HtpasswdFile: filepath.Join(dir, "missing")})
	require.NoError(t, err)
	assert.ErrorContains(t, ext.Start(context.Background(), componenttest.NewNopHost()), "htpasswd_file:")
}
