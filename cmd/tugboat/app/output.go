package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
	"golang.org/x/term"
)

// outputFlag is -o: table (default), wide (a table with more columns),
// json or yaml.
type outputFlag string

func (o *outputFlag) bind(cmd *cobra.Command) {
	cmd.Flags().StringVarP((*string)(o), "output", "o", "table", "output format: table, wide, json or yaml")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"table", "wide", "json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
}

// validate refuses an unknown format with a usage error.
func (o outputFlag) validate() error {
	switch o {
	case "", "table", "wide", "json", "yaml":
		return nil
	}
	return usageErrorf("unknown output format %q: use table, wide, json or yaml", string(o))
}

// wide reports whether o asks for the wide table.
func (o outputFlag) wide() bool { return o == "wide" }

// structured reports whether o asks for JSON or YAML, and writes v so.
func (o outputFlag) structured(w io.Writer, v any) (bool, error) {
	switch o {
	case "json":
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return true, err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return true, err
	case "yaml":
		b, err := toYAML(v)
		if err != nil {
			return true, err
		}
		_, err = w.Write(b)
		return true, err
	}
	return false, nil
}

// toYAML renders v as YAML with its JSON field names and order.
func toYAML(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var n yaml.Node
	if err := yaml.Unmarshal(b, &n); err != nil {
		return nil, err
	}
	var plain func(*yaml.Node)
	plain = func(n *yaml.Node) {
		n.Style = 0
		for _, c := range n.Content {
			plain(c)
		}
	}
	plain(&n)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// painter colors the status cells of tables (health, readiness, phase,
// severity), only when stdout is a terminal and NO_COLOR
// (https://no-color.org) is not set: never into a pipe, a file or a test's
// buffer.
type painter struct{ on bool }

// newPainter decides for w, the verb's stdout.
func newPainter(w io.Writer) painter {
	return painter{on: colorFor(w, os.Getenv)}
}

// colorFor reports whether output to w may be colored: w is a terminal,
// NO_COLOR is unset or empty, and TERM is not "dumb".
func colorFor(w io.Writer, getenv func(string) string) bool {
	if getenv("NO_COLOR") != "" || getenv("TERM") == "dumb" {
		return false
	}
	return isTerminal(w)
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}

// ANSI colors. Every painted cell carries escapes of the same length (a
// two-digit color and a reset), so tabwriter, which counts them as width,
// still aligns the columns: paint every cell of a column, header included.
const (
	green   = "\x1b[32m"
	red     = "\x1b[31m"
	yellow  = "\x1b[33m"
	neutral = "\x1b[39m"
	reset   = "\x1b[0m"
)

// cell paints a status value by what it means: green for good, red for
// bad, yellow for under way or unknown; "" prints "-".
func (p painter) cell(s string) string {
	if s == "" {
		s = "-"
	}
	if !p.on {
		return s
	}
	c := neutral
	switch s {
	case "Current", "True", "Succeeded", "deployed", "ok":
		c = green
	case "Failed", "False", "failed", "Aborted", "error", "Refused":
		c = red
	case "InProgress", "Unknown", "Pending", "WaitingApproval", "Running", "Verifying", "Paused", "RollingBack", "warning",
		"pending-install", "pending-upgrade", "pending-rollback", "uninstalling":
		c = yellow
	}
	return c + s + reset
}

// header is a column title in a painted column.
func (p painter) header(s string) string {
	if !p.on {
		return s
	}
	return neutral + s + reset
}
