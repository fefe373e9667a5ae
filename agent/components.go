package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
)

// component is one long-running part of the agent (tracker, reporter,
// action poller, webhook server).
type component struct {
	name  string
	start func(context.Context) error
}

// errStoppedEarly is the error of a component that returned while the
// agent was still meant to run, without an error of its own.
var errStoppedEarly = errors.New("stopped while the agent was running")

// runComponents runs every component until ctx ends. The agent is all or
// nothing: when one component returns before ctx ends, with an error or
// without, the others are stopped and runComponents returns an error naming
// it, so that the process ends non-zero and the kubelet restarts it,
// instead of running on half-dead (a tracker without a reporter records
// nothing; a reporter without a tracker reports an empty spoke). When ctx
// ends, it waits for every component and returns nil; the errors of
// components that failed while stopping are logged.
func runComponents(ctx context.Context, log logr.Logger, components ...component) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		name string
		err  error
	}
	done := make(chan result, len(components))
	for _, c := range components {
		go func() { done <- result{c.name, c.start(ctx)} }()
	}
	var first error
	for range components {
		r := <-done
		if ctx.Err() == nil { // the first to stop, while the agent runs
			err := r.err
			if err == nil {
				err = errStoppedEarly
			}
			first = fmt.Errorf("agent component %s: %w", r.name, err)
			log.Error(err, "Agent component stopped; stopping the agent", "component", r.name)
			cancel()
			continue
		}
		if r.err != nil && !errors.Is(r.err, context.Canceled) {
			log.Error(r.err, "Agent component stopped with an error", "component", r.name)
		}
	}
	return first
}

// mustRun wraps a manager runnable so that returning before its context
// ends is an error: controller-runtime stops the manager (and the process
// exits non-zero) only for a runnable that returns an error.
type mustRun struct {
	name     string
	runnable interface{ Start(context.Context) error }
}

func (m mustRun) Start(ctx context.Context) error {
	err := m.runnable.Start(ctx)
	if ctx.Err() != nil {
		return err
	}
	if err == nil {
		err = errStoppedEarly
	}
	return fmt.Errorf("agent component %s: %w", m.name, err)
}

// NeedLeaderElection is false: every agent replica runs its components.
func (m mustRun) NeedLeaderElection() bool { return false }
