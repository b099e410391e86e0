package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/dripmesh/drip/client"
	"github.com/dripmesh/drip/internal/workload"
)

// Mode is how each publisher spaces its messages.
type Mode string

// The send modes of Carzaniga09 §5.1.4: a constant rate, evenly spaced or as a
// Poisson process, or a Poisson process whose rate grows linearly.
const (
	Constant Mode = "constant" // evenly spaced at Rate
	Poisson  Mode = "poisson"  // exponential gaps at Rate
	Ramp     Mode = "ramp"     // Poisson, rate from RateStart to Rate over Duration
)

// Modes lists the valid send modes.
var Modes = []Mode{Constant, Poisson, Ramp}

// Preset returns the workload preset by name: "single" is the comparative
// workload of Carzaniga09 §5.2.1 (one constraint per filter, 200 names, client
// replication about 5% of the subscribers), "default" the generative model
// of §5.1.4 (one to five constraints, 10 names), "ranges" the single
// workload with mostly numeric range constraints (workload.Ranges), the
// case the Bloom scheme's range categories exist for.
func Preset(name string) (workload.Config, error) {
	switch name {
	case "single":
		return workload.SingleConstraint(), nil
	case "default":
		return workload.Default(), nil
	case "ranges":
		return workload.Ranges(), nil
	default:
		return workload.Config{}, fmt.Errorf("unknown workload %q: want single, default or ranges", name)
	}
}

// Config is one experiment.
type Config struct {
	Brokers      []string        // addresses; clients go to them round-robin
	WorkloadName string          // for the report only
	Workload     workload.Config // messages and predicates
	Subscribers  int             // S, one predicate each
	Publishers   int             // P
	Mode         Mode
	Rate         float64       // total messages/s over all publishers; Ramp's final rate
	RateStart    float64       // Ramp's initial total rate
	Duration     time.Duration // how long publishers send
	Warmup       time.Duration // pause after subscribing, for forwarding state to propagate
	Drain        time.Duration // longest wait for outstanding deliveries after sending stops
	// Settle is how long to keep listening once every expected delivery has
	// arrived, to catch duplicates and false positives that trail them on
	// other streams.
	Settle time.Duration
	// CutStuckPublishers makes publishers still blocked Drain after
	// sending should have ended (a system that stopped accepting messages)
	// a measured outcome rather than an error: they are cut, counted in
	// Totals.PublishersCut, and the run drains and reports as usual.
	CutStuckPublishers bool

	ConnectTimeout time.Duration // bound on connecting to each broker; 0 for none
	// FailoverWait bounds how long a drip client keeps trying other
	// brokers after its broker failed before the run gives up; 0 for no
	// bound.
	FailoverWait  time.Duration
	ClientOptions []client.Option // for every connection (TLS, dialer)
	Progress      io.Writer       // a line per second; nil for none

	// Connect opens the connection to a broker; nil connects to drip
	// brokers with the client package (and ClientOptions). Brokers are
	// then whatever names Connect understands.
	Connect Connector
	// Ready, when set, is called once every subscription is installed and
	// every publisher open, and before Warmup, to wait until the system's
	// routing state has settled (Carzaniga09 §5.1.4 step 5); an error ends
	// the run. Publishers open first because a drip publisher subscribes to
	// its congestion feedback: opened after Ready, a thousand of them sent
	// a wave of advertisements into the first seconds of sending.
	Ready func(ctx context.Context) error
	// OnSendStart, when set, is called as sending starts: the time origin
	// of Report.Series, for measurements taken beside the bench.
	OnSendStart func()
}

// Validate reports the first field of c that makes no sense.
func (c Config) Validate() error {
	finite := func(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
	switch {
	case len(c.Brokers) == 0:
		return fmt.Errorf("bench: no broker addresses")
	case c.Subscribers < 1:
		return fmt.Errorf("bench: %d subscribers, want at least 1", c.Subscribers)
	case c.Publishers < 1:
		return fmt.Errorf("bench: %d publishers, want at least 1", c.Publishers)
	case c.Mode != Constant && c.Mode != Poisson && c.Mode != Ramp:
		return fmt.Errorf("bench: unknown mode %q: want constant, poisson or ramp", c.Mode)
	case !finite(c.Rate) || c.Rate < 0 || (c.Rate == 0 && c.Mode != Ramp):
		return fmt.Errorf("bench: rate %v messages/s, want a positive number", c.Rate)
	case c.Mode == Ramp && (!finite(c.RateStart) || c.RateStart < 0):
		return fmt.Errorf("bench: ramp start rate %v messages/s, want zero or more", c.RateStart)
	case c.Mode == Ramp && c.Rate == 0 && c.RateStart == 0:
		return fmt.Errorf("bench: a ramp from 0 to 0 messages/s sends nothing")
	case c.Duration <= 0:
		return fmt.Errorf("bench: duration %v, want more than 0", c.Duration)
	case c.Warmup < 0:
		return fmt.Errorf("bench: warmup %v, want 0 or more", c.Warmup)
	case c.Drain < 0:
		return fmt.Errorf("bench: drain %v, want 0 or more", c.Drain)
	case c.Settle < 0:
		return fmt.Errorf("bench: settle %v, want 0 or more", c.Settle)
	}
	for i, b := range c.Brokers {
		if b == "" {
			return fmt.Errorf("bench: broker address %d is empty", i)
		}
	}
	return c.Workload.Validate()
}
