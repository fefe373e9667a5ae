package promotion

import (
	"net/url"
	"strings"
)

// publicURL returns raw without what must not reach a status that many
// people read: user information, the fragment, and query parameters that
// look like credentials (token, key, secret, signature, password, auth, code,
// sig). Anything that is not an absolute http(s) URL is dropped.
func publicURL(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ""
	}
	u.User, u.Fragment, u.RawFragment = nil, "", ""
	q := u.Query()
	for k := range q {
		if credentialParam(k) {
			q.Del(k)
		}
	}
	u.RawQuery = q.Encode()
	if len(u.String()) > 2048 {
		return ""
	}
	return u.String()
}

func credentialParam(name string) bool {
	n := strings.ToLower(name)
	for _, s := range []string{"token", "key", "secret", "sig", "password", "passwd", "auth", "code", "credential", "session"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}
