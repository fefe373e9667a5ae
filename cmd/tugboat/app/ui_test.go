//go:build !agentonly

package app_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"tugboat.dev/tugboat/cmd/tugboat/app"
)

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestUI_servesTheDashboardOnLoopbackAsTheUser(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	newPipeline(t, ns, "web")

	cmd := app.NewRootCommand()
	var out, errOut syncBuffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs([]string{"ui", "-n", ns, "--port", "0", "--no-open", "--kubeconfig", cluster.KubeconfigPath})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()

	addr := regexp.MustCompile(`as (\S+): (http://127\.0\.0\.1:\d+/)\?token=([0-9a-f]{48})\n`)
	g.Eventually(out.String, 20*time.Second, 50*time.Millisecond).Should(MatchRegexp(addr.String()))
	m := addr.FindStringSubmatch(out.String())
	// The name the API server authenticated, not the kubeconfig's user
	// entry (hub-admin).
	g.Expect(m[1]).To(Equal("tugboat-harness-admin"))
	url, token := m[2], m[3]

	// Without this run's access token, nothing is served: another local
	// process cannot read a page, or its CSRF token, and act as the user
	// (security review 3, low 6).
	for _, u := range []string{url, url + "promotions/x", url + "events", url + "?token=" + strings.Repeat("0", 48)} {
		resp, err := http.Get(u)
		g.Expect(err).NotTo(HaveOccurred())
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized), u)
		g.Expect(string(body)).NotTo(ContainSubstring("csrf"), u)
	}

	// The printed address sets an access cookie and drops the token from
	// the address.
	jar, err := cookiejar.New(nil)
	g.Expect(err).NotTo(HaveOccurred())
	browser := &http.Client{Jar: jar}
	resp, err := browser.Get(url + "?token=" + token)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.Request.URL.String()).To(Equal(url), "redirected to the page without the token")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	g.Expect(string(body)).To(ContainSubstring(`id="pl-web"`))
	g.Expect(string(body)).To(ContainSubstring("namespace <strong>" + ns + "</strong>"))

	// Another name for the address (DNS rebinding) is refused.
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Host = "rebind.example:80"
	resp, err = browser.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusMisdirectedRequest))

	// An open event stream does not keep it from stopping.
	sctx, scancel := context.WithCancel(context.Background())
	defer scancel()
	sreq, _ := http.NewRequestWithContext(sctx, http.MethodGet, url+"events", nil)
	stream, err := browser.Do(sreq)
	g.Expect(err).NotTo(HaveOccurred())
	defer stream.Body.Close()

	cancel()
	g.Eventually(done, 10*time.Second).Should(Receive(BeNil()))
	g.Expect(errOut.String()).To(BeEmpty())
}

func TestUI_refusesABadPort(t *testing.T) {
	g := NewWithT(t)
	_, _, err := tugboat("ui", "--port", "70000", "--no-open")
	g.Expect(err).To(MatchError(ContainSubstring("--port: must be between 0 and 65535, got 70000")))
}
