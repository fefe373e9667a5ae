package dashboard

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"net/url"
)

// accessQuery is the query parameter that carries Options.AccessToken in
// the address tugboat ui prints; accessCookie keeps it for the pages that
// follow.
const accessQuery = "token"

// accessCookieName is the access cookie of the dashboard with token:
// cookies do not tell ports apart, so each dashboard has its own.
func accessCookieName(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "tugboat_access_" + hex.EncodeToString(sum[:4])
}

// checkAccess lets a request through when the dashboard has no access
// token, or when the request carries it: in its access cookie, or in the
// token query parameter of the address tugboat ui printed, which sets the
// cookie and redirects to the same page without it (so the token does not
// linger in the history or a Referer). Anything else is answered 401,
// before any page, event stream or form is served: another local process,
// or a page in the browser, cannot reach the dashboard (and its CSRF
// token) without the address that was printed once.
func (s *Server) checkAccess(w http.ResponseWriter, r *http.Request) bool {
	if s.opts.AccessToken == "" {
		return true
	}
	if c, err := r.Cookie(s.accessCookie); err == nil && s.validAccess(c.Value) {
		return true
	}
	if v := r.URL.Query().Get(accessQuery); v != "" && s.validAccess(v) && r.Method == http.MethodGet {
		http.SetCookie(w, &http.Cookie{Name: s.accessCookie, Value: s.opts.AccessToken, Path: s.opts.BasePath, HttpOnly: true, SameSite: http.SameSiteStrictMode}) //nolint:gosec // plain HTTP on loopback: Secure would drop it
		q := r.URL.Query()
		q.Del(accessQuery)
		to := url.URL{Path: r.URL.Path, RawQuery: q.Encode()}
		http.Redirect(w, r, to.String(), http.StatusSeeOther)
		return false
	}
	s.fail(w, r, http.StatusUnauthorized, "open the dashboard through the address tugboat ui printed (it carries this run's access token)")
	return false
}

func (s *Server) validAccess(v string) bool {
	return subtle.ConstantTimeCompare([]byte(v), []byte(s.opts.AccessToken)) == 1
}
