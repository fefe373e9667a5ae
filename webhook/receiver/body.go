package receiver

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"tugboat.dev/tugboat/api/clip"
)

// Bodies are read before the signature over them can be checked, so until
// then they are anyone's. Three bounds keep an anonymous caller from making
// the hub hold memory it did not earn:
//
//   - a body's buffer grows with the bytes that actually arrive, never to the
//     Content-Length a caller claims;
//   - past Options.PreAuthBodyLimit bytes, a body needs one of
//     Options.PreAuthLargeBodies slots: few unauthenticated requests may hold
//     a large buffer at once, while small ones (an agent's usual batch) are
//     never queued behind them;
//   - every unauthenticated buffer is charged to Options.PreAuthMemoryLimit,
//     one budget for the whole server.
//
// A request that finds no slot or no budget is answered 503 with
// Retry-After, releases what it held, and the agent retries. Once the
// signature verifies (or fails), the body's charge and slot are returned.

// firstRead is the buffer a body starts with.
const firstRead = 4 << 10

// preAuthRetryAfter is the Retry-After of a 503 for a busy pre-auth budget.
const preAuthRetryAfter = time.Second

// preAuthBudget accounts for the bodies not yet authenticated.
type preAuthBudget struct {
	smallLimit int64
	slots      chan struct{}
	limit      int64
	used       atomic.Int64
}

func newPreAuthBudget(o *Options) *preAuthBudget {
	return &preAuthBudget{smallLimit: o.PreAuthBodyLimit, slots: make(chan struct{}, o.PreAuthLargeBodies), limit: o.PreAuthMemoryLimit}
}

// charge takes n bytes of the budget, or reports false.
func (b *preAuthBudget) charge(n int64) bool {
	if b.used.Add(n) > b.limit {
		b.used.Add(-n)
		return false
	}
	return true
}

// claim is one body's share of the pre-auth budget.
type claim struct {
	b       *preAuthBudget
	charged int64
	large   bool
	done    bool
}

// grow charges the claim for a buffer of capacity size; it reports what
// ran out ("" when nothing did).
func (c *claim) grow(size int64) string {
	if size > c.b.smallLimit && !c.large {
		select {
		case c.b.slots <- struct{}{}:
			c.large = true
		default:
			return "too many large request bodies are being received"
		}
	}
	if extra := size - c.charged; extra > 0 {
		if !c.b.charge(extra) {
			return "too much request data is being received"
		}
		c.charged = size
	}
	return ""
}

// release returns the claim's charge and slot; it may be called again.
func (c *claim) release() {
	if c == nil || c.done {
		return
	}
	c.done = true
	c.b.used.Add(-c.charged)
	if c.large {
		<-c.b.slots
	}
}

// readBody reads r's body as sent, up to limit bytes, and returns it with
// whether it is gzip-encoded and the body's pre-auth claim, which the caller
// releases once the signature is checked. It answers 415 for a content
// encoding other than identity or gzip, 413 past limit, and 503 when the
// pre-auth bounds are reached, and then returns ok false.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, endpoint string, limit int64) (raw []byte, gzipped bool, c *claim, ok bool) {
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip", "x-gzip":
		gzipped = true
	default:
		s.reject(endpoint, reasonUnsupportedEncoding, "", "encoding", clip.String(enc, quoteLimit))
		writeError(w, http.StatusUnsupportedMediaType, errorf("unsupported Content-Encoding %q: send identity or gzip", clip.String(enc, quoteLimit)))
		return nil, false, nil, false
	}
	tooLarge := func() {
		s.reject(endpoint, reasonBodyTooLarge, "")
		writeError(w, http.StatusRequestEntityTooLarge, errorf("body exceeds %d bytes", limit))
	}
	if r.ContentLength > limit {
		tooLarge()
		return nil, false, nil, false
	}
	c = &claim{b: s.preAuth}
	raw, err := s.readLimited(r.Body, limit, c)
	var busy errBusy
	switch {
	case err == nil:
	case errors.As(err, &busy):
		c.release()
		s.reject(endpoint, reasonPreAuthBusy, "")
		retryAfter(w, preAuthRetryAfter)
		writeError(w, http.StatusServiceUnavailable, errorf("%s: retry later", string(busy)))
		return nil, false, nil, false
	case errors.Is(err, errBodyTooLarge):
		c.release()
		tooLarge()
		return nil, false, nil, false
	default:
		c.release()
		s.reject(endpoint, reasonInvalidBody, "", "error", err.Error())
		writeError(w, http.StatusBadRequest, errorf("reading body: %v", err))
		return nil, false, nil, false
	}
	s.metrics.bodyBytes.WithLabelValues(endpoint).Observe(float64(len(raw)))
	return raw, gzipped, c, true
}

// errBusy is a pre-auth bound reached; its text says which.
type errBusy string

func (e errBusy) Error() string { return string(e) }

var errBodyTooLarge = errors.New("body too large")

// readLimited reads body up to limit bytes into a buffer that doubles as
// data arrives, charging each growth to c.
func (s *Server) readLimited(body io.Reader, limit int64, c *claim) ([]byte, error) {
	size := min(int64(firstRead), limit+1)
	if why := c.grow(size); why != "" {
		return nil, errBusy(why)
	}
	buf := make([]byte, 0, size)
	for {
		if int64(len(buf)) == int64(cap(buf)) {
			if int64(len(buf)) > limit {
				return nil, errBodyTooLarge
			}
			size = min(2*int64(cap(buf)), limit+1)
			if why := c.grow(size); why != "" {
				return nil, errBusy(why)
			}
			buf = append(make([]byte, 0, size), buf...)
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, errBodyTooLarge
		}
		switch {
		case errors.Is(err, io.EOF):
			return buf, nil
		case err != nil:
			return nil, err
		}
	}
}

// errDecompressedTooLarge is a gzip body past the decompressed limit.
var errDecompressedTooLarge = errors.New("decompressed body too large")

// gunzip decompresses a gzip body up to limit bytes.
func gunzip(raw []byte, limit int64) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("body: invalid gzip data: %w", err)
	}
	defer func() { _ = zr.Close() }()
	var out bytes.Buffer
	out.Grow(min(len(raw)*4, int(limit)) + 1)
	n, err := out.ReadFrom(io.LimitReader(zr, limit+1))
	if err != nil {
		return nil, fmt.Errorf("body: invalid gzip data: %w", err)
	}
	if n > limit {
		return nil, errDecompressedTooLarge
	}
	return out.Bytes(), nil
}

// plainBody returns the body to parse: raw itself, or raw decompressed. It
// answers 413 past Options.DecompressedLimit and 400 for corrupt gzip data.
func (s *Server) plainBody(w http.ResponseWriter, endpoint, spoke string, raw []byte, gzipped bool) ([]byte, bool) {
	if !gzipped {
		return raw, true
	}
	body, err := gunzip(raw, s.opts.DecompressedLimit)
	switch {
	case errors.Is(err, errDecompressedTooLarge):
		s.reject(endpoint, reasonBodyTooLarge, spoke)
		writeError(w, http.StatusRequestEntityTooLarge, errorf("decompressed body exceeds %d bytes", s.opts.DecompressedLimit))
		return nil, false
	case err != nil:
		s.reject(endpoint, reasonInvalidBody, spoke)
		writeError(w, http.StatusBadRequest, errorf("%v", err))
		return nil, false
	}
	return body, true
}

// signedBody reads a spoke's request body (readBody, at most limit bytes),
// lets authenticate check its signature over the raw bytes while the
// pre-authentication claim is held, releases the claim, and returns the
// Spoke and the body to parse (plainBody). ok is false once it has
// answered the request.
func (s *Server) signedBody(w http.ResponseWriter, r *http.Request, endpoint, spoke string, limit int64,
	authenticate func(raw []byte) (*Spoke, bool),
) (sp *Spoke, body []byte, ok bool) {
	raw, gzipped, c, ok := s.readBody(w, r, endpoint, limit)
	if !ok {
		return nil, nil, false
	}
	sp, authed := authenticate(raw)
	c.release()
	if !authed {
		return nil, nil, false
	}
	body, ok = s.plainBody(w, endpoint, spoke, raw, gzipped)
	if !ok {
		return nil, nil, false
	}
	return sp, body, true
}
