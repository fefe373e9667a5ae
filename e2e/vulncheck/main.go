// Command vulncheck reads govulncheck's JSON output (-format json) on stdin
// and fails, as govulncheck's own text mode does, when the code calls a
// vulnerable symbol (`make vulncheck`, run by `make lint`). It lists each
// vulnerability once: its id, summary, the module and version found, the
// version that fixes it, and one call path from tugboat's code.
//
// One difference: vulnerabilities of the Go standard library are only
// warnings when -accept-stdlib names the Go version that scanned (the
// toolchain this machine has, which the repository cannot upgrade): an
// explicit, dated exception that lapses as soon as the toolchain changes.
// Vulnerable modules always fail: go.mod can fix them.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// The parts of govulncheck's JSON protocol (golang.org/x/vuln/internal/govulncheck,
// protocol v1.0.0) that this command reads.
type message struct {
	Config  *config  `json:"config,omitempty"`
	OSV     *osv     `json:"osv,omitempty"`
	Finding *finding `json:"finding,omitempty"`
}

type config struct {
	ProtocolVersion string `json:"protocol_version"`
	ScannerVersion  string `json:"scanner_version"`
	DB              string `json:"db"`
	GoVersion       string `json:"go_version"`
}

type osv struct {
	ID      string `json:"id"`
	Summary string `json:"summary"`
}

type finding struct {
	OSV          string  `json:"osv"`
	FixedVersion string  `json:"fixed_version"`
	Trace        []frame `json:"trace"`
}

type frame struct {
	Module   string `json:"module"`
	Version  string `json:"version"`
	Package  string `json:"package"`
	Function string `json:"function"`
	Receiver string `json:"receiver"`
}

// called is one vulnerability the code reaches.
type called struct {
	id, module, version, fixed, path string
}

func main() {
	acceptStdlib := flag.String("accept-stdlib", "", "Go version (e.g. go1.26.8) whose standard-library vulnerabilities only warn")
	flag.Parse()
	if err := run(os.Stdin, os.Stdout, *acceptStdlib); err != nil {
		fmt.Fprintln(os.Stderr, "vulncheck:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer, acceptStdlib string) error {
	var (
		cfg       config
		summaries = map[string]string{}
		found     = map[string]called{}
	)
	dec := json.NewDecoder(in)
	for {
		var m message
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("reading govulncheck's JSON output: %w", err)
		}
		switch {
		case m.Config != nil:
			cfg = *m.Config
		case m.OSV != nil:
			summaries[m.OSV.ID] = m.OSV.Summary
		case m.Finding != nil:
			f := m.Finding
			// Symbol-level findings only: the code calls the vulnerable
			// function (trace[0]); module- and package-level ones are
			// imported but not reached.
			if len(f.Trace) == 0 || f.Trace[0].Function == "" {
				continue
			}
			if _, seen := found[f.OSV]; seen {
				continue
			}
			found[f.OSV] = called{id: f.OSV, module: f.Trace[0].Module, version: f.Trace[0].Version, fixed: f.FixedVersion, path: callPath(f.Trace)}
		}
	}
	if cfg.ScannerVersion == "" {
		return errors.New("no govulncheck configuration in the input: pipe `govulncheck -format json` into it")
	}
	ids := make([]string, 0, len(found))
	for id := range found {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var failing, accepted int
	for _, id := range ids {
		c := found[id]
		level := "error"
		if c.module == "stdlib" && acceptStdlib != "" && acceptStdlib == cfg.GoVersion {
			level = "warning"
			accepted++
		} else {
			failing++
		}
		fmt.Fprintf(out, "%s  %s: %s\n    %s@%s, fixed in %s\n    %s\n", level, c.id, summaries[c.id], c.module, c.version, c.fixed, c.path)
	}
	fmt.Fprintf(out, "govulncheck %s (%s, database %s): %d vulnerabilities called, %d accepted (standard library of %s, -accept-stdlib)\n",
		cfg.ScannerVersion, cfg.GoVersion, cfg.DB, len(ids), accepted, acceptStdlib)
	if failing > 0 {
		return fmt.Errorf("%d vulnerabilities are called by the code: upgrade the modules (go get MODULE@FIXED) or Go to the fixed versions", failing)
	}
	return nil
}

// callPath renders a trace, from tugboat's code (the last frame) to the
// vulnerable symbol (the first).
func callPath(trace []frame) string {
	parts := make([]string, 0, len(trace))
	for i := len(trace) - 1; i >= 0; i-- {
		f := trace[i]
		name := f.Function
		if f.Receiver != "" {
			name = strings.TrimPrefix(f.Receiver, "*") + "." + name
		}
		parts = append(parts, f.Package+"."+name)
	}
	return strings.Join(parts, " -> ")
}
