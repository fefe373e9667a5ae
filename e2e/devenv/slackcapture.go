package devenv

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// SlackCaptureFile is the file in Dir where the dev environment's Slack
// stand-in records what the hub's Slack notifier sends.
const SlackCaptureFile = "slack.jsonl"

// slackCapture stands in for Slack's Web API (chat.postMessage and
// chat.update) in the dev environment: it appends every message the hub's
// Slack notifier sends to a file, one JSON object per line, and answers as
// Slack does, so a new user sees the notices of the demo without a Slack
// workspace.
type slackCapture struct {
	URL  string // the API base URL, ending in /api/
	Path string // the capture file

	srv  *http.Server
	mu   sync.Mutex
	file *os.File
	seq  int
}

// capturedMessage is one line of the capture file.
type capturedMessage struct {
	Time     time.Time       `json:"time"`
	Method   string          `json:"method"`
	Channel  string          `json:"channel,omitempty"`
	TS       string          `json:"ts,omitempty"`
	ThreadTS string          `json:"thread_ts,omitempty"`
	Text     string          `json:"text,omitempty"`
	Blocks   json.RawMessage `json:"blocks,omitempty"`
}

// startSlackCapture serves the stand-in on a free loopback port.
func startSlackCapture(dir string) (*slackCapture, error) {
	path := dir + string(os.PathSeparator) + SlackCaptureFile
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	c := &slackCapture{URL: "http://" + ln.Addr().String() + "/api/", Path: path, file: f}
	c.srv = &http.Server{Handler: c, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = c.srv.Serve(ln) }()
	return c, nil
}

// ServeHTTP records chat.postMessage and chat.update calls.
func (c *slackCapture) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	form, _ := url.ParseQuery(string(body))
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		var m map[string]any
		if json.Unmarshal(body, &m) == nil {
			for k, v := range m {
				if s, ok := v.(string); ok {
					form.Set(k, s)
				} else if raw, err := json.Marshal(v); err == nil {
					form.Set(k, string(raw))
				}
			}
		}
	}
	c.mu.Lock()
	c.seq++
	ts := form.Get("ts")
	if method == "chat.postMessage" {
		ts = fmt.Sprintf("%d.%06d", time.Now().Unix(), c.seq)
	}
	msg := capturedMessage{Time: time.Now().UTC(), Method: method, Channel: form.Get("channel"), TS: ts,
		ThreadTS: form.Get("thread_ts"), Text: form.Get("text")}
	if b := form.Get("blocks"); b != "" && json.Valid([]byte(b)) {
		msg.Blocks = json.RawMessage(b)
	}
	if line, err := json.Marshal(msg); err == nil {
		_, _ = c.file.Write(append(line, '\n'))
	}
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	channel := msg.Channel
	if channel == "" {
		channel = "CDEVCAPTURE"
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": channel, "ts": ts})
}

// Close stops the stand-in.
func (c *slackCapture) Close() error {
	err := c.srv.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	return joinErr(err, c.file.Close())
}

func joinErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
