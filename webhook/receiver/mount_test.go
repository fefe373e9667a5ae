package receiver_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	. "github.com/onsi/gomega"

	"tugboat.dev/tugboat/webhook/receiver"
)

func TestReceiver_servesMountedHandlersBeforeItsOwnRoutes(t *testing.T) {
	g := NewWithT(t)
	answer := func(code int, body string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(code)
			_, _ = w.Write([]byte(body + " " + r.URL.Path))
		})
	}
	h := newHarness(t, func(o *receiver.Options) {
		o.Mounts = map[string]http.Handler{
			"/v1/pipelines/":                answer(http.StatusCreated, "pipelines"),
			"/v1/pipelines/special/":        answer(http.StatusAccepted, "special"),
			"/v1/spokes/" + testSpoke + "/": answer(http.StatusTeapot, "shadowed"),
		}
	})
	do := func(method, path string) *httptest.ResponseRecorder {
		return h.do(httptest.NewRequest(method, path, nil))
	}

	rec := do(http.MethodPost, "/v1/pipelines/fleet/web/promotions")
	g.Expect(rec.Code).To(Equal(http.StatusCreated))
	g.Expect(rec.Body.String()).To(Equal("pipelines /v1/pipelines/fleet/web/promotions"))

	rec = do(http.MethodPost, "/v1/pipelines/special/x/approvals")
	g.Expect(rec.Code).To(Equal(http.StatusAccepted), "the longest prefix wins")

	rec = do(http.MethodPost, "/v1/spokes/"+testSpoke+"/events")
	g.Expect(rec.Code).To(Equal(http.StatusTeapot), "mounts come before the receiver's routes")

	rec = do(http.MethodGet, "/healthz")
	g.Expect(rec.Code).To(Equal(http.StatusOK), "unmounted paths keep their routes")
	rec = do(http.MethodPost, "/v1/pipelines")
	g.Expect(rec.Code).To(Equal(http.StatusNotFound), "the prefix is matched as given")

	g.Expect(h.metric("tugboat_receiver_requests_total", map[string]string{"endpoint": "mount", "code": "201"})).To(Equal(1.0))
	g.Expect(h.metric("tugboat_receiver_requests_total", map[string]string{"endpoint": "mount", "code": "418"})).To(Equal(1.0))
}

func TestOptions_validateMounts(t *testing.T) {
	ok := http.NotFoundHandler()
	for _, tc := range []struct {
		prefix string
		h      http.Handler
		valid  bool
	}{
		{"/v1/pipelines/", ok, true},
		{"v1/pipelines/", ok, false},
		{"/v1/pipelines", ok, false},
		{"/v1/pipelines/", nil, false},
	} {
		o := receiver.NewOptions()
		o.Mounts = map[string]http.Handler{tc.prefix: tc.h}
		if err := o.Validate(); (err == nil) != tc.valid {
			t.Errorf("mount %q (handler set: %v): Validate() = %v", tc.prefix, tc.h != nil, err)
		}
	}
}
