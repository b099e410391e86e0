package experiment

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dripmesh/drip/internal/testbed/systems"
	"github.com/dripmesh/drip/internal/topology"
)

// Fault is a failure injected while the clients send, to measure
// reconvergence under load (Carzaniga09 §5.2.2's mesh, issue 19): a lab
// link cut and healed after For (the lab drops the link's packets, so the
// brokers see silence, not a closed stream), or a site's broker killed
// with SIGKILL (its neighbours' streams close) and started again after
// For with the same command line.
type Fault struct {
	Kind  FaultKind
	Sites []string      // a cut's two sites; a restart's one
	At    time.Duration // after sending starts
	For   time.Duration // how long the link stays cut, the broker down
}

// FaultKind is what a Fault does.
type FaultKind string

// The kinds of Fault.
const (
	FaultCut     FaultKind = "cut"
	FaultRestart FaultKind = "restart"
)

// ParseFault reads a fault as `cut:A/B@AT+FOR` (cut the link between sites
// A and B AT after sending starts, heal it FOR later) or
// `restart:SITE@AT+FOR` (kill SITE's broker, start it again FOR later).
func ParseFault(s string) (Fault, error) {
	kind, rest, ok := strings.Cut(s, ":")
	if !ok {
		return Fault{}, fmt.Errorf("fault %q: want cut:A/B@AT+FOR or restart:SITE@AT+FOR", s)
	}
	where, when, ok := strings.Cut(rest, "@")
	if !ok {
		return Fault{}, fmt.Errorf("fault %q: no @AT+FOR", s)
	}
	at, length, ok := strings.Cut(when, "+")
	if !ok {
		return Fault{}, fmt.Errorf("fault %q: no +FOR after the time", s)
	}
	f := Fault{Kind: FaultKind(kind)}
	var err error
	if f.At, err = time.ParseDuration(at); err != nil || f.At < 0 {
		return Fault{}, fmt.Errorf("fault %q: time %q: want a duration ≥ 0 such as 20s", s, at)
	}
	if f.For, err = time.ParseDuration(length); err != nil || f.For <= 0 {
		return Fault{}, fmt.Errorf("fault %q: length %q: want a positive duration such as 10s", s, length)
	}
	switch f.Kind {
	case FaultCut:
		a, b, ok := strings.Cut(where, "/")
		if !ok || a == "" || b == "" || a == b {
			return Fault{}, fmt.Errorf("fault %q: a cut names two sites, A/B", s)
		}
		f.Sites = []string{a, b}
	case FaultRestart:
		if where == "" || strings.Contains(where, "/") {
			return Fault{}, fmt.Errorf("fault %q: a restart names one site", s)
		}
		f.Sites = []string{where}
	default:
		return Fault{}, fmt.Errorf("fault %q: kind %q, want cut or restart", s, kind)
	}
	return f, nil
}

func (f Fault) String() string {
	return fmt.Sprintf("%s:%s@%v+%v", f.Kind, strings.Join(f.Sites, "/"), f.At, f.For)
}

// check says what is wrong with f on topology t.
func (f Fault) check(t *topology.Topology) error {
	for _, s := range f.Sites {
		if !slices.ContainsFunc(t.Brokers, func(b topology.Broker) bool { return b.Name == s }) {
			return fmt.Errorf("fault %s: no site %q in the scenario's topology", f, s)
		}
	}
	if f.Kind == FaultCut && !slices.ContainsFunc(t.Neighbors(f.Sites[0]), func(n topology.Neighbor) bool { return n.Broker.Name == f.Sites[1] }) {
		return fmt.Errorf("fault %s: no link between %s and %s", f, f.Sites[0], f.Sites[1])
	}
	return nil
}

// FaultRecord is what a fault did, in seconds from the start of sending
// and on the wall clock (to line up with the brokers' logs and scrapes).
type FaultRecord struct {
	Fault string `json:"fault"`
	// AtS is when the link was cut or the broker killed, EndS when the
	// link was healed or the broker started again.
	AtS  float64   `json:"at_s"`
	EndS float64   `json:"end_s,omitempty"`
	At   time.Time `json:"at"`
	End  time.Time `json:"end,omitzero"`
	// SettledS is how long after EndS systems.Deployment.Ready passed:
	// every broker knows every router and holds every advertisement, in
	// the same version everywhere. It does not wait for a healed link to
	// carry an adjacency again (a mesh that routes around it agrees
	// too), and subscription changes after the fault (clients leaving at
	// the end of a run) delay it: read it beside the brokers' logs.
	SettledS float64 `json:"settled_after_end_s,omitempty"`
	Error    string  `json:"error,omitempty"`
}

// linkCutter cuts and heals lab links (*lab.Lab).
type linkCutter interface {
	Cut(ctx context.Context, a, b string) error
	Heal(ctx context.Context, a, b string) error
}

// faultInjector runs a run's faults one after another from the start of
// sending.
type faultInjector struct {
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	records []FaultRecord
}

// startFaults injects faults, in order of At, into dep and the lab links
// from t0, the start of sending. The deployment must not be used for
// anything else until wait returns.
func startFaults(ctx context.Context, faults []Fault, links linkCutter, dep systems.Deployment, t0 time.Time, logf func(string, ...any)) *faultInjector {
	ctx, cancel := context.WithCancel(ctx)
	fi := &faultInjector{cancel: cancel, done: make(chan struct{})}
	faults = slices.Clone(faults)
	slices.SortStableFunc(faults, func(a, b Fault) int { return int(a.At - b.At) })
	go func() {
		defer close(fi.done)
		for _, f := range faults {
			rec := FaultRecord{Fault: f.String()}
			select {
			case <-ctx.Done():
				rec.Error = "not injected: sending ended first"
				fi.add(rec)
				continue
			case <-time.After(time.Until(t0.Add(f.At))):
			}
			inject(ctx, f, links, dep, t0, &rec, logf)
			fi.add(rec)
		}
	}()
	return fi
}

// inject does one fault and undoes it; the undo runs even when ctx ends
// meanwhile, so that a run never ends with a link cut or a broker down.
func inject(ctx context.Context, f Fault, links linkCutter, dep systems.Deployment, t0 time.Time, rec *FaultRecord, logf func(string, ...any)) {
	undoCtx := context.WithoutCancel(ctx)
	var undo func() error
	switch f.Kind {
	case FaultCut:
		if links == nil {
			rec.Error = "a link cut needs a lab (--lab)"
			return
		}
		a, b := f.Sites[0], f.Sites[1]
		if err := links.Cut(ctx, a, b); err != nil {
			rec.Error = err.Error()
			return
		}
		undo = func() error { return links.Heal(undoCtx, a, b) }
	case FaultRestart:
		r, ok := dep.(systems.Restarter)
		if !ok {
			rec.Error = "this system's brokers cannot be restarted"
			return
		}
		if err := r.Kill(f.Sites[0]); err != nil {
			rec.Error = err.Error()
			return
		}
		undo = func() error { return r.Restart(undoCtx, f.Sites[0]) }
	}
	rec.At = time.Now()
	rec.AtS = rec.At.Sub(t0).Seconds()
	logf("fault %s: done at %.1f s", f, rec.AtS)
	select {
	case <-ctx.Done():
	case <-time.After(f.For):
	}
	if err := undo(); err != nil {
		rec.Error = fmt.Sprintf("undoing: %v", err)
		return
	}
	rec.End = time.Now()
	rec.EndS = rec.End.Sub(t0).Seconds()
	if ctx.Err() != nil {
		rec.Error = "routing did not settle: sending ended first"
		return
	}
	logf("fault %s: undone at %.1f s; waiting for routing to settle", f, rec.EndS)
	readyCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := dep.Ready(readyCtx); err != nil {
		rec.Error = fmt.Sprintf("routing did not settle: %v", err)
		return
	}
	rec.SettledS = time.Since(rec.End).Seconds()
	logf("fault %s: routing settled %.1f s after", f, rec.SettledS)
}

func (fi *faultInjector) add(r FaultRecord) {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	fi.records = append(fi.records, r)
}

// peek returns what the faults done so far did.
func (fi *faultInjector) peek() []FaultRecord {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	return slices.Clone(fi.records)
}

// wait ends the faults not yet injected and returns what each did.
func (fi *faultInjector) wait() []FaultRecord {
	fi.cancel()
	<-fi.done
	return fi.peek()
}
