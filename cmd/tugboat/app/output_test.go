package app

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal and returns its terminal end (what a
// shell's stdout is) and its controlling end.
func openPTY(t *testing.T) (tty, pty *os.File) {
	t.Helper()
	pty, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("opening a pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { _ = pty.Close() })
	if err := unix.IoctlSetPointerInt(int(pty.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(pty.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tty.Close() })
	return tty, pty
}

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// Color goes to a terminal only, and never with NO_COLOR set or TERM=dumb.
func TestColorFor_onlyATerminalWithoutNO_COLOR(t *testing.T) {
	g := NewWithT(t)
	tty, _ := openPTY(t)
	g.Expect(colorFor(tty, env(nil))).To(BeTrue())
	g.Expect(colorFor(tty, env(map[string]string{"TERM": "xterm-256color"}))).To(BeTrue())
	g.Expect(colorFor(tty, env(map[string]string{"NO_COLOR": "1"}))).To(BeFalse())
	g.Expect(colorFor(tty, env(map[string]string{"TERM": "dumb"}))).To(BeFalse())

	var buf bytes.Buffer
	g.Expect(colorFor(&buf, env(nil))).To(BeFalse(), "a buffer")
	f, err := os.CreateTemp(t.TempDir(), "out")
	g.Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	g.Expect(colorFor(f, env(nil))).To(BeFalse(), "a file")
	r, w, err := os.Pipe()
	g.Expect(err).NotTo(HaveOccurred())
	defer r.Close()
	defer w.Close()
	g.Expect(colorFor(w, env(nil))).To(BeFalse(), "a pipe")
}

// Painted columns stay aligned: every cell of a painted column carries
// escapes of the same length.
func TestPainter_keepsColumnsAligned(t *testing.T) {
	g := NewWithT(t)
	pt := painter{on: true}
	var buf bytes.Buffer
	tw := newTable(&buf)
	row(tw, "NAME", pt.header("HEALTH"), "AGE")
	row(tw, "web", pt.cell("Current"), "1d")
	row(tw, "api-server", pt.cell("Failed"), "2d")
	row(tw, "db", pt.cell(""), "3d")
	row(tw, "cache", pt.cell("Something"), "4d")
	g.Expect(tw.Flush()).To(Succeed())
	out := buf.String()
	g.Expect(out).To(ContainSubstring(green + "Current" + reset))
	g.Expect(out).To(ContainSubstring(red + "Failed" + reset))
	g.Expect(out).To(ContainSubstring(neutral + "-" + reset))
	strip := strings.NewReplacer(green, "", red, "", yellow, "", neutral, "", reset, "")
	var ageAt []int
	for _, l := range strings.Split(strings.TrimSpace(strip.Replace(out)), "\n") {
		ageAt = append(ageAt, strings.LastIndex(l, " ")+1)
	}
	g.Expect(ageAt).To(HaveEach(ageAt[0]), strip.Replace(out))

	plain := painter{}
	g.Expect(plain.cell("Current")).To(Equal("Current"))
	g.Expect(plain.cell("")).To(Equal("-"))
	g.Expect(plain.header("HEALTH")).To(Equal("HEALTH"))
}
