package dashboard

import (
	"crypto/subtle"
	"net/http"

	"tugboat.dev/tugboat/api/clip"
)

// checkCSRF refuses a POST that did not come from one of the dashboard's
// own pages, answering 403, and parses its form (at most maxFormBytes).
// Two checks must pass: net/http's cross-origin protection (Sec-Fetch-Site
// same-origin, or an Origin matching the Host), and the per-process token
// in both the cookie the pages set and the form's csrf field.
func (s *Server) checkCSRF(w http.ResponseWriter, r *http.Request) bool {
	if err := s.cop.Check(r); err != nil {
		s.fail(w, r, http.StatusForbidden, "cross-site request refused: actions are taken only from the dashboard's own pages")
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		s.fail(w, r, http.StatusBadRequest, "the form could not be read: "+clip.String(err.Error(), 200))
		return false
	}
	c, err := r.Cookie(s.cookieName)
	if err != nil || !s.validToken(c.Value) || !s.validToken(r.PostFormValue("csrf")) {
		s.fail(w, r, http.StatusForbidden, "the form's CSRF token is missing or stale: reload the page and try again")
		return false
	}
	return true
}

func (s *Server) validToken(v string) bool {
	return subtle.ConstantTimeCompare([]byte(v), []byte(s.token)) == 1
}
