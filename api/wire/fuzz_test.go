package wire_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"tugboat.dev/tugboat/api/wire"
)

// maxErrorLength bounds error messages: a hostile body must not be able to
// make the 400 response or the logs large.
const maxErrorLength = 8 << 10

// Seed corpora live in testdata/fuzz/<FuzzName>/.

func FuzzVerify(f *testing.F) {
	v, err := wire.NewVerifier(testKey, otherKey, wire.WithClock(fixedClock))
	if err != nil {
		f.Fatal(err)
	}
	f.Add("POST", testPath, testTSValue, wire.Sign(testKey, testTime, "POST", testPath, testBody), testBody)
	f.Fuzz(func(t *testing.T, method, path, ts, sig string, body []byte) {
		err := v.Verify(method, path, ts, sig, body)
		if err != nil {
			if !errors.Is(err, wire.ErrUnauthorized) {
				t.Fatalf("error %v does not match ErrUnauthorized", err)
			}
			var ve *wire.VerifyError
			if !errors.As(err, &ve) || ve.Reason() == "" {
				t.Fatalf("error %v is not a *VerifyError with a reason", err)
			}
		} else {
			// Accepted: some v1 entry must be the HMAC under one of the keys,
			// computed here independently of the package.
			if !containsMAC(sig, testKey, ts, method, path, body) && !containsMAC(sig, otherKey, ts, method, path, body) {
				t.Fatalf("accepted a request whose signature %q matches no key", sig)
			}
		}

		// Whatever the input, a request the package signs now verifies.
		now := strconv.FormatInt(testTime.Unix(), 10)
		if err := v.Verify(method, path, now, wire.Sign(testKey, testTime, method, path, body), body); err != nil {
			t.Fatalf("Sign then Verify failed: %v", err)
		}
		if err := v.Verify(method, path, now, wire.Sign(otherKey, testTime, method, path, body), body); err != nil {
			t.Fatalf("Sign with the previous key then Verify failed: %v", err)
		}
		// ... and fails for any other body.
		other := append(bytes.Clone(body), 'x')
		if err := v.Verify(method, path, now, wire.Sign(testKey, testTime, method, path, body), other); !errors.Is(err, wire.ErrSignatureMismatch) {
			t.Fatalf("tampered body: got %v, want ErrSignatureMismatch", err)
		}
	})
}

func containsMAC(header string, key []byte, ts, method, path string, body []byte) bool {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("v1:" + ts + ":" + strings.ToUpper(method) + ":" + path + ":"))
	m.Write(body)
	want := hex.EncodeToString(m.Sum(nil))
	for _, e := range strings.Split(header, ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(e), "v1="); ok && strings.EqualFold(v, want) {
			return true
		}
	}
	return false
}

func FuzzDecodeEventBatch(f *testing.F) {
	b, _ := json.Marshal(validBatch())
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		batch, err := wire.DecodeEventBatch(bytes.NewReader(data), 1<<16)
		if err != nil {
			checkDecodeError(t, err)
			return
		}
		if err := batch.Validate(); err != nil {
			t.Fatalf("decoded batch does not validate: %v", err)
		}
		roundTrip(t, batch, func(b []byte) (any, error) { return wire.DecodeEventBatch(bytes.NewReader(b), 1<<20) })
	})
}

func FuzzDecodeStateSnapshot(f *testing.F) {
	b, _ := json.Marshal(validSnapshot())
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		snap, err := wire.DecodeStateSnapshot(bytes.NewReader(data), 1<<16)
		if err != nil {
			checkDecodeError(t, err)
			return
		}
		if err := snap.Validate(); err != nil {
			t.Fatalf("decoded snapshot does not validate: %v", err)
		}
		roundTrip(t, snap, func(b []byte) (any, error) { return wire.DecodeStateSnapshot(bytes.NewReader(b), 1<<20) })
	})
}

func checkDecodeError(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, wire.ErrInvalid) && !errors.Is(err, wire.ErrTooLarge) {
		t.Fatalf("error %v matches neither ErrInvalid nor ErrTooLarge", err)
	}
	if n := len(err.Error()); n > maxErrorLength {
		t.Fatalf("error message is %d bytes long", n)
	}
}

// roundTrip checks that what was accepted encodes to a body that is accepted
// again and encodes the same.
func roundTrip(t *testing.T, v any, decode func([]byte) (any, error)) {
	t.Helper()
	first, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	again, err := decode(first)
	if err != nil {
		t.Fatalf("re-decoding %s: %v", first, err)
	}
	second, err := json.Marshal(again)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	if !bytes.Equal(first, second) {
		t.Fatalf("round trip changed the body:\n%s\n%s", first, second)
	}
}

// TestFuzzSeeds_validSeedsAreAccepted keeps the committed corpora honest: a
// seed named valid* must decode (or verify) cleanly, any other must not.
func TestFuzzSeeds_validSeedsAreAccepted(t *testing.T) {
	v, err := wire.NewVerifier(testKey, otherKey, wire.WithClock(fixedClock))
	if err != nil {
		t.Fatal(err)
	}
	for _, fuzz := range []string{"FuzzVerify", "FuzzDecodeEventBatch", "FuzzDecodeStateSnapshot"} {
		files, err := filepath.Glob(filepath.Join("testdata", "fuzz", fuzz, "*"))
		if err != nil || len(files) < 3 {
			t.Fatalf("%s: want at least 3 seeds, got %d (%v)", fuzz, len(files), err)
		}
		for _, file := range files {
			args := readSeed(t, file)
			var err error
			switch fuzz {
			case "FuzzVerify":
				err = v.Verify(string(args[0]), string(args[1]), string(args[2]), string(args[3]), args[4])
			case "FuzzDecodeEventBatch":
				_, err = wire.DecodeEventBatch(bytes.NewReader(args[0]), 1<<16)
			case "FuzzDecodeStateSnapshot":
				_, err = wire.DecodeStateSnapshot(bytes.NewReader(args[0]), 1<<16)
			}
			wantValid := strings.HasPrefix(filepath.Base(file), "valid")
			if wantValid && err != nil {
				t.Errorf("%s: want accepted, got %v", file, err)
			}
			if !wantValid && err == nil {
				t.Errorf("%s: want rejected, got accepted", file)
			}
		}
	}
}

// readSeed parses a "go test fuzz v1" file of string(...), []byte(...) and
// int(...) lines (an int comes back as its decimal digits).
func readSeed(t *testing.T, file string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if lines[0] != "go test fuzz v1" {
		t.Fatalf("%s: not a fuzz corpus file", file)
	}
	var args [][]byte
	for _, l := range lines[1:] {
		if n, ok := strings.CutPrefix(l, "int("); ok {
			args = append(args, []byte(strings.TrimSuffix(n, ")")))
			continue
		}
		l = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(l, "string("), "[]byte("), ")")
		s, err := strconv.Unquote(l)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		args = append(args, []byte(s))
	}
	return args
}
