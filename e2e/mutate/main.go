// Command mutate is tugboat's mutation test (`make mutate`): it applies
// targeted, deliberate bugs to the rules of controllers/pipeline,
// controllers/releasehistory, webhook/receiver, webhook/receiver/spokedir,
// agent/reporter and agent/hubhttp, one at a time, runs that package's
// tests, and counts the bugs the tests catch and the ones that survive.
// Every file is restored after each mutation, and on interrupt. A mutation
// whose code is no longer there (the code moved on) is reported as
// skipped: update its row.
//
// It is not part of `make test`: it runs each package's tests once per
// mutation.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// mutation is one deliberate bug: the only occurrence of Old in File
// becomes New.
type mutation struct {
	Pkg, File, Name, Old, New string
}

// outcome of one mutation.
type outcome string

const (
	caught   outcome = "caught"
	survived outcome = "SURVIVED"
	skipped  outcome = "skipped (code not found)"
	invalid  outcome = "invalid (does not compile)"
)

func main() {
	only := flag.String("only", "", "run only the mutations of packages containing this string")
	name := flag.String("name", "", "run only the mutations whose name contains this string")
	timeout := flag.Duration("timeout", 10*time.Minute, "bound of one package test run")
	flag.Parse()
	if err := run(*only, *name, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(1)
	}
}

func run(only, name string, timeout time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	counts := map[outcome]int{}
	var rows []string
	for _, m := range mutations {
		if (only != "" && !strings.Contains(m.Pkg, only)) || (name != "" && !strings.Contains(m.Name, name)) {
			continue
		}
		o, err := try(ctx, m, timeout)
		if err != nil {
			return err
		}
		counts[o]++
		row := fmt.Sprintf("| %s | %s | %s |", m.Pkg, m.Name, o)
		rows = append(rows, row)
		fmt.Println(row)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	scored := counts[caught] + counts[survived]
	fmt.Println()
	fmt.Println("| package | mutation | outcome |\n|---|---|---|")
	for _, r := range rows {
		fmt.Println(r)
	}
	fmt.Printf("\nscore: %d of %d mutations caught", counts[caught], scored)
	if scored > 0 {
		fmt.Printf(" (%.0f%%)", 100*float64(counts[caught])/float64(scored))
	}
	fmt.Printf("; %d skipped, %d invalid\n", counts[skipped], counts[invalid])
	if counts[survived] > 0 {
		return fmt.Errorf("%d mutations survived", counts[survived])
	}
	return nil
}

// try applies m, runs its package's tests and restores the file.
func try(ctx context.Context, m mutation, timeout time.Duration) (outcome, error) {
	orig, err := os.ReadFile(m.File)
	if err != nil {
		return "", err
	}
	if bytes.Count(orig, []byte(m.Old)) != 1 {
		return skipped, nil
	}
	mutated := bytes.Replace(orig, []byte(m.Old), []byte(m.New), 1)
	if err := os.WriteFile(m.File, mutated, 0o644); err != nil { //nolint:gosec // m.File comes from the mutation table in this program, not from input
		return "", err
	}
	defer func() {
		if err := os.WriteFile(m.File, orig, 0o644); err != nil { //nolint:gosec // as above
			fmt.Fprintf(os.Stderr, "mutate: RESTORE %s BY HAND (git checkout): %v\n", m.File, err)
		}
	}()
	if out, err := exec.CommandContext(ctx, "go", "build", "./"+m.Pkg).CombinedOutput(); err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		fmt.Fprintf(os.Stderr, "%s: %s\n", m.Name, firstLine(out))
		return invalid, nil
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(tctx, "go", "test", "-count=1", "-timeout", timeout.String(), "./"+m.Pkg)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	if err == nil {
		return survived, nil
	}
	if bytes.Contains(out, []byte("[build failed]")) || bytes.Contains(out, []byte("[setup failed]")) {
		return invalid, nil
	}
	return caught, nil
}

func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
