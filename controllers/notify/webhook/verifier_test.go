package webhook_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	tugboatv1alpha1 "tugboat.dev/tugboat/api/v1alpha1"
	"tugboat.dev/tugboat/controllers/notify/notifytest"
	"tugboat.dev/tugboat/controllers/notify/webhook"
)

// The receiver-side examples of docs/notifiers.md, tested here: the Go
// function below appears in the docs verbatim, and the shell script is
// taken from the docs and run.

// BEGIN verifyTugboat (docs/notifiers.md shows this function verbatim)

// verifyTugboat reports whether r, whose body is body, is signed with key
// by tugboat (scheme v1) within five minutes of now.
func verifyTugboat(r *http.Request, body, key []byte, now time.Time) bool {
	ts := r.Header.Get("X-Tugboat-Timestamp")
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || secs < now.Unix()-300 || secs > now.Unix()+300 {
		return false
	}
	path := r.URL.EscapedPath()
	if path == "" {
		path = "/"
	}
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "v1:%s:%s:%s:", ts, r.Method, path)
	mac.Write(body)
	want := "v1=" + hex.EncodeToString(mac.Sum(nil))
	for _, sig := range strings.Split(r.Header.Get("X-Tugboat-Signature"), ",") {
		if hmac.Equal([]byte(strings.TrimSpace(sig)), []byte(want)) {
			return true
		}
	}
	return false
}

// END verifyTugboat

// captured is one request as a receiver sees it.
type captured struct {
	method, path, ts, sig string
	body                  []byte
}

func capture(t *testing.T, key []byte) (captured, bool) {
	t.Helper()
	var c captured
	var ok bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c = captured{method: r.Method, path: r.URL.EscapedPath(), ts: r.Header.Get("X-Tugboat-Timestamp"), sig: r.Header.Get("X-Tugboat-Signature"), body: body}
		ok = verifyTugboat(r, body, key, time.Now())
	}))
	defer srv.Close()
	w, err := webhook.New(webhook.Options{URL: srv.URL + "/hooks/tugboat?team=platform", Key: key})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Notify(context.Background(), notifytest.Promotion(tugboatv1alpha1.EventPromotionSucceeded), ""); err != nil {
		t.Fatal(err)
	}
	return c, ok
}

func docs(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../../docs/notifiers.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestVerifierExamples_go(t *testing.T) {
	g := NewWithT(t)
	src, err := os.ReadFile("verifier_test.go")
	g.Expect(err).NotTo(HaveOccurred())
	_, fn, _ := strings.Cut(string(src), "(docs/notifiers.md shows this function verbatim)\n\n")
	fn, _, _ = strings.Cut(fn, "\n\n// END verifyTugboat")
	g.Expect(fn).To(HavePrefix("// verifyTugboat reports"))
	g.Expect(docs(t)).To(ContainSubstring(fn), "docs/notifiers.md shows verifyTugboat as tested here")

	c, ok := capture(t, key)
	g.Expect(ok).To(BeTrue())
	// And it refuses what it should.
	r := httptest.NewRequest(c.method, c.path, bytes.NewReader(c.body))
	r.Header.Set("X-Tugboat-Timestamp", c.ts)
	r.Header.Set("X-Tugboat-Signature", c.sig)
	g.Expect(verifyTugboat(r, c.body, key, time.Now())).To(BeTrue())
	g.Expect(verifyTugboat(r, append(c.body, ' '), key, time.Now())).To(BeFalse(), "another body")
	g.Expect(verifyTugboat(r, c.body, []byte("another key, 32 bytes long......"), time.Now())).To(BeFalse(), "another key")
	g.Expect(verifyTugboat(r, c.body, key, time.Now().Add(10*time.Minute))).To(BeFalse(), "too late")
	r2 := httptest.NewRequest(c.method, "/elsewhere", bytes.NewReader(c.body))
	r2.Header = r.Header
	g.Expect(verifyTugboat(r2, c.body, key, time.Now())).To(BeFalse(), "another path")
}

func TestVerifierExamples_shell(t *testing.T) {
	g := NewWithT(t)
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl is not installed")
	}
	_, script, ok := strings.Cut(docs(t), "<!-- webhook-verify-sh")
	g.Expect(ok).To(BeTrue(), "docs/notifiers.md has the shell verifier")
	_, script, _ = strings.Cut(script, "```sh\n")
	script, _, _ = strings.Cut(script, "```")

	c, ok := capture(t, key)
	g.Expect(ok).To(BeTrue())
	dir := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(dir, "verify.sh"), []byte(script), 0o600)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, "body.json"), c.body, 0o600)).To(Succeed())
	run := func(keyText, path string, body []byte) error {
		g.Expect(os.WriteFile(filepath.Join(dir, "body.json"), body, 0o600)).To(Succeed())
		cmd := exec.Command("bash", "verify.sh", "body.json")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(),
			"TUGBOAT_KEY="+keyText, "REQUEST_METHOD="+c.method, "REQUEST_PATH="+path,
			"HTTP_X_TUGBOAT_TIMESTAMP="+c.ts, "HTTP_X_TUGBOAT_SIGNATURE="+c.sig)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	}
	g.Expect(run(string(key), c.path, c.body)).To(Succeed())
	g.Expect(run(string(key), c.path, append(c.body, ' '))).NotTo(Succeed(), "another body")
	g.Expect(run("another key, 32 bytes long......", c.path, c.body)).NotTo(Succeed(), "another key")
	g.Expect(run(string(key), "/elsewhere", c.body)).NotTo(Succeed(), "another path")
}
