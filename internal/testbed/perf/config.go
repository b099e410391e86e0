package perf

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Case names, in the order they run and are reported. Issue 12's case 4,
// the broker CPU per delivered message, is measured in every run of the
// first three and summarised as a table of its own (CaseCPU).
const (
	CaseOneToOne   = "one-to-one"
	CaseMaps       = "one-to-one-maps"
	CaseFanOut     = "fan-out"
	CaseTwoBrokers = "two-brokers"
	CaseCPU        = "cpu-per-delivery"
	CaseLatency    = "latency"
	CaseInert      = "inert-filters"
	CaseContent    = "content-routing"
	CaseHenjes     = "henjes07"
)

// CaseNames are the cases that can be selected, in order.
func CaseNames() []string {
	return []string{CaseOneToOne, CaseMaps, CaseFanOut, CaseTwoBrokers, CaseLatency, CaseInert, CaseContent, CaseHenjes}
}

// Config is one invocation of the harness.
type Config struct {
	// Cases to run, a subset of CaseNames; empty means all.
	Cases []string
	// Reps is the number of interleaved repetitions per system (drip,
	// NATS, drip, NATS, ...); the tables report medians.
	Reps int
	// Warmup is sent before the measured window of each run, Duration is
	// the window; Drain bounds the wait for late deliveries afterwards.
	Warmup, Duration, Drain time.Duration
	// FanOut is the subscribers of the fan-out case (issue 12: 20).
	FanOut int
	// LatencyRate is the fixed publishing rate of the latency case, msg/s.
	LatencyRate float64
	// InertFilters is the inert filters of the inert-filters case.
	InertFilters int
	// ContentSubscribers is the subscribers of the content-routing case,
	// each with a Carzaniga09 single-constraint predicate; ContentMessages
	// the distinct workload messages the publisher cycles through.
	ContentSubscribers, ContentMessages int
	// HenjesFilters are the non-matching filters installed (Henjes07's
	// m_subs^add) and HenjesReplication the matching subscribers (r) of
	// the Henjes07 grid; every pair is a point. Its runs use HenjesWarmup,
	// HenjesDuration and HenjesDrain: the case measures throughput only,
	// and ActiveMQ's backlog at 10,000 filters would drain for minutes.
	HenjesFilters, HenjesReplication          []int
	HenjesWarmup, HenjesDuration, HenjesDrain time.Duration
	// HenjesWindow bounds the messages outstanding (sent, not yet
	// delivered to every matching subscriber) in the Henjes07 runs: the
	// publisher stays saturated, as Henjes07 §3.3's are, but the queue is
	// at the publisher, so that no system still works through a backlog
	// during the next run, the other system's.
	HenjesWindow int

	// DripBinary is the drip whose `drip broker` processes are measured;
	// DripEnv is added to their environment.
	DripBinary string
	DripEnv    []string
	// SubscriberCommand runs this binary's `perf subscribers` (argv
	// prefix; the content-routing case's subscriber process), with
	// SubscriberEnv added to its environment.
	SubscriberCommand []string
	SubscriberEnv     []string

	// Dir keeps the servers' configuration and logs; a temporary
	// directory, removed afterwards, when empty.
	Dir string
	// Out receives the JSON and PNG results; Report, when set, is the
	// Markdown page written from them.
	Out, Report string
	// Command, Source and Note are recorded in the results: how they were
	// made, what code was measured (a git commit), and what the reader
	// should know (such as "baseline before ...").
	Command, Source, Note string
	// Progress receives a line per run; nil for none.
	Progress io.Writer
}

// DefaultConfig is the full run, about 13 minutes on a 2-core machine.
func DefaultConfig() Config {
	return Config{
		Reps: 3, Warmup: time.Second, Duration: 5 * time.Second, Drain: 5 * time.Second,
		FanOut: 20, LatencyRate: 10000, InertFilters: 10000,
		ContentSubscribers: 100, ContentMessages: 10000,
		HenjesFilters: []int{1, 10, 100, 1000, 10000}, HenjesReplication: []int{1, 2, 5, 10},
		HenjesWarmup: 500 * time.Millisecond, HenjesDuration: 2 * time.Second, HenjesDrain: time.Second, HenjesWindow: 1000,
	}
}

// QuickConfig is a smoke run of every case: one repetition of short runs,
// fewer filters, a smaller Henjes07 grid (about 2 minutes).
func QuickConfig() Config {
	c := DefaultConfig()
	c.Reps, c.Warmup, c.Duration = 1, 300*time.Millisecond, time.Second
	c.InertFilters = 1000
	c.HenjesFilters, c.HenjesReplication = []int{1, 100}, []int{1, 2}
	c.HenjesWarmup, c.HenjesDuration = 300*time.Millisecond, time.Second
	return c
}

// validate reports the first setting that cannot work.
func (c Config) validate() error {
	for _, name := range c.Cases {
		if !slices.Contains(CaseNames(), name) {
			return fmt.Errorf("unknown case %q: want some of %s", name, strings.Join(CaseNames(), ", "))
		}
	}
	switch {
	case c.Reps < 1:
		return fmt.Errorf("repetitions %d: want at least 1", c.Reps)
	case c.Duration <= 0 || c.HenjesDuration <= 0:
		return errors.New("durations must be positive")
	case c.Warmup < 0 || c.HenjesWarmup < 0 || c.Drain < 0 || c.HenjesDrain < 0:
		return errors.New("warm-up and drain must not be negative")
	case c.FanOut < 1 || c.ContentSubscribers < 1 || c.ContentMessages < 1:
		return errors.New("fan-out, content subscribers and content messages must be at least 1")
	case c.LatencyRate <= 0:
		return fmt.Errorf("latency rate %g: want a positive rate", c.LatencyRate)
	case c.InertFilters < 1:
		return fmt.Errorf("inert filters %d: want at least 1", c.InertFilters)
	case c.HenjesWindow < 1:
		return fmt.Errorf("Henjes07 window %d: want at least 1", c.HenjesWindow)
	case len(c.HenjesFilters) == 0 || len(c.HenjesReplication) == 0:
		return errors.New("the Henjes07 grid needs filters and replication grades")
	case c.DripBinary == "":
		return errors.New("no drip binary: the brokers run as drip broker processes")
	case c.Out == "":
		return errors.New("no output directory")
	}
	for _, n := range c.HenjesFilters {
		if n < 0 {
			return fmt.Errorf("Henjes07 filters %d: want at least 0", n)
		}
	}
	for _, r := range c.HenjesReplication {
		if r < 1 {
			return fmt.Errorf("Henjes07 replication grade %d: want at least 1", r)
		}
	}
	return nil
}

func (c Config) selected(name string) bool {
	return len(c.Cases) == 0 || slices.Contains(c.Cases, name)
}
