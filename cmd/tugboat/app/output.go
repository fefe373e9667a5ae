package app

import (
	"io"
	"os"

	"golang.org/x/term"
)

// painter colours the status cells of tables (health, readiness, phase,
// severity), only when stdout is a terminal and NO_COLOR
// (https://no-color.org) is not set: never into a pipe, a file or a test's
// buffer.
type painter struct{ on bool }

// newPainter decides for w, the verb's stdout.
func newPainter(w io.Writer) painter {
	return painter{on: colorFor(w, os.Getenv)}
}

// colorFor reports whether output to w may be coloured: w is a terminal,
// NO_COLOR is unset or empty, and TERM is not "dumb".
func colorFor(w io.Writer, getenv func(string) string) bool {
	if getenv("NO_COLOR") != "" || getenv("TERM") == "dumb" {
		return false
	}
	f, ok := w.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}

// ANSI colours. Every painted cell carries escapes of the same length (a
// two-digit colour and a reset), so tabwriter, which counts them as width,
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
	case "InProgress", "Unknown", "Pending", "WaitingApproval", "Running", "Verifying", "warning",
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
