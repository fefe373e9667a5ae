package receiver

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// readBody reads r's body as sent, up to limit bytes, and returns it with
// whether it is gzip-encoded. It answers 415 for a content encoding other
// than identity or gzip and 413 past limit, and then returns ok false.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, endpoint string, limit int64) (raw []byte, gzipped bool, ok bool) {
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip", "x-gzip":
		gzipped = true
	default:
		s.reject(endpoint, reasonUnsupportedEncoding, "", "encoding", clip(enc))
		writeError(w, http.StatusUnsupportedMediaType, errorf("unsupported Content-Encoding %q: send identity or gzip", clip(enc)))
		return nil, false, false
	}
	tooLarge := func() {
		s.reject(endpoint, reasonBodyTooLarge, "")
		writeError(w, http.StatusRequestEntityTooLarge, errorf("body exceeds %d bytes", limit))
	}
	if r.ContentLength > limit {
		tooLarge()
		return nil, false, false
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength) + 1)
	} else {
		buf.Grow(4 << 10)
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		tooLarge()
		return nil, false, false
	case err != nil:
		s.reject(endpoint, reasonInvalidBody, "", "error", err.Error())
		writeError(w, http.StatusBadRequest, errorf("reading body: %v", err))
		return nil, false, false
	}
	s.metrics.bodyBytes.WithLabelValues(endpoint).Observe(float64(buf.Len()))
	return buf.Bytes(), gzipped, true
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
