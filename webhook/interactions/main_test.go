package interactions_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"tugboat.dev/tugboat/e2e/harness"
)

// cluster is a real API server with tugboat's CRDs.
var cluster *harness.Cluster

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	os.Exit(harness.Main(harness.Options{Name: "slack", ControlPlaneOnly: true, TugboatCRDs: true}, func(c *harness.Cluster) int {
		cluster = c
		return m.Run()
	}))
}

const signingSecret = "8f742231b10e8888abcd99yyyzzz85a5"

// sign signs body the way Slack does: v0=hex(HMAC-SHA256(secret,
// "v0:"+timestamp+":"+body)). It is written from Slack's documentation,
// not with the library the hub verifies with.
func sign(r *http.Request, secret string, body []byte, at time.Time) {
	ts := strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("v0:" + ts + ":"))
	mac.Write(body)
	r.Header.Set("X-Slack-Request-Timestamp", ts)
	r.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
}

// click returns the form body Slack posts when user clicks a button.
func click(actionID, value, userID, userName, responseURL string) []byte {
	payload := map[string]any{
		"type":         "block_actions",
		"team":         map[string]any{"id": "T0001", "domain": "example"},
		"user":         map[string]any{"id": userID, "username": userName, "name": userName, "team_id": "T0001"},
		"api_app_id":   "A0001",
		"token":        "deprecated-verification-token",
		"trigger_id":   "1.2.3",
		"response_url": responseURL,
		"container":    map[string]any{"type": "message", "message_ts": "1700000000.000100", "channel_id": "C0DEMO"},
		"channel":      map[string]any{"id": "C0DEMO", "name": "deploys"},
		"actions": []map[string]any{{
			"type": "button", "action_id": actionID, "block_id": "tugboat_decision", "value": value,
			"text": map[string]any{"type": "plain_text", "text": "Approve"}, "action_ts": "1700000001.000200",
		}},
	}
	raw, _ := json.Marshal(payload)
	return []byte(url.Values{"payload": {string(raw)}}.Encode())
}

// slackStandIn stands in for Slack's Web API (chat.postMessage,
// chat.update) and for response_url. It checks what Slack would require
// of each call and records the calls.
type slackStandIn struct {
	t   *testing.T
	srv *httptest.Server

	mu        sync.Mutex
	posts     []url.Values // chat.postMessage and chat.update, form-encoded
	responses []map[string]any
	seq       int
}

func newSlackStandIn(t *testing.T) *slackStandIn {
	s := &slackStandIn{t: t}
	s.srv = httptest.NewServer(s)
	t.Cleanup(s.srv.Close)
	return s
}

func (s *slackStandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case strings.HasPrefix(r.URL.Path, "/response/"):
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			http.Error(w, "invalid_payload", http.StatusBadRequest)
			return
		}
		s.responses = append(s.responses, m)
		_, _ = io.WriteString(w, "ok")
	case r.URL.Path == "/api/chat.postMessage" || r.URL.Path == "/api/chat.update":
		form, err := url.ParseQuery(string(body))
		if err != nil || r.Header.Get("Authorization") != "Bearer xoxb-test-token" && form.Get("token") != "xoxb-test-token" {
			_ = json.NewEncoder(w).Encode(map[string]any{"ok": false, "error": "invalid_auth"})
			return
		}
		if form.Get("channel") == "" {
			_ = json.NewEncoder(w).Encode(map[string]any{"ok": false, "error": "channel_not_found"})
			return
		}
		if b := form.Get("blocks"); b != "" {
			var blocks []map[string]any
			if err := json.Unmarshal([]byte(b), &blocks); err != nil || len(blocks) > 50 {
				_ = json.NewEncoder(w).Encode(map[string]any{"ok": false, "error": "invalid_blocks"})
				return
			}
		}
		s.posts = append(s.posts, form)
		s.seq++
		ts := form.Get("ts")
		if ts == "" {
			ts = "1700000000." + strconv.Itoa(100000+s.seq)
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": form.Get("channel"), "ts": ts})
	default:
		http.NotFound(w, r)
	}
}

// blocksWith reports whether a recorded post's blocks contain s.
func (s *slackStandIn) postsContaining(sub string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, p := range s.posts {
		if strings.Contains(p.Get("blocks"), sub) {
			n++
		}
	}
	return n
}

func (s *slackStandIn) responseTexts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, r := range s.responses {
		text, _ := r["text"].(string)
		if r["replace_original"] == true {
			text = "[replace] " + text
		}
		out = append(out, text)
	}
	return out
}
