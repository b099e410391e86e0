package node

import (
	"errors"
	"fmt"
	"time"

	"github.com/dripmesh/drip/internal/content"
	"github.com/dripmesh/drip/internal/dedup"
	"github.com/dripmesh/drip/internal/drp"
	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/linkstate"
	"github.com/dripmesh/drip/internal/wire"
)

// Config is what a Node runs with: its identity, its neighbours, the
// protocol's parameters and the bounds of its data plane. DefaultConfig
// fills every field but the identity and peers. The driver's own settings
// (links, dialling) are broker.Config's.
type Config struct {
	// ID is the router ID: unique in the mesh, and small, because
	// destination sets are bitsets over router IDs (Carzaniga09 §2.3).
	ID uint32
	// MatchAll says what the broker does with other routers' filters that
	// match every message (MatchAllPolicy; empty Mode: MatchAllAllow).
	MatchAll MatchAllPolicy
	// MaxRouterID is the largest router ID the mesh admits. Bundles naming
	// a larger one are refused, so no peer can make per-message state grow
	// with an arbitrary ID.
	MaxRouterID uint32
	// Name labels the broker in logs, metrics and clients' acks.
	Name string
	// Mesh names the mesh; links form only between brokers of one mesh.
	Mesh string
	// Peers are the neighbours this broker dials. A neighbour that dials
	// this broker is accepted whether or not it is listed.
	Peers []Peer

	// LinkState configures the routing protocol; ID, Name and Encoding
	// are overwritten from the fields above.
	LinkState linkstate.Config
	// Encoding are the Bloom parameters every broker of the mesh shares.
	Encoding encoding.Params
	// DRP configures forwarding: broadcast threshold and hop limit.
	DRP drp.Config

	// TickInterval is how often the routing protocol's timers are driven;
	// it bounds their resolution.
	TickInterval time.Duration
	// PredicateRebuildInterval bounds how often the encoded-predicate index
	// is rebuilt while advertisements keep changing; a rebuild costs tens of
	// milliseconds at 1000 routers × 100 filters, on a goroutine beside the
	// control plane (IndexBuilder). A rebuild also waits ten times as long
	// as the previous one took, so that rebuilds take at most a tenth of the
	// broker's time however large the table or slow the CPU.
	PredicateRebuildInterval time.Duration
	// AdvertiseInterval is the least time between two originations of
	// this broker's predicate advertisement (OSPF's MinLSInterval): a
	// change after a quiet period is advertised at once, and a burst of
	// subscriptions within the interval is advertised once at its end. An
	// advertisement carries every local filter, tens of kilobytes at a
	// few hundred subscribers, so advertising each change of a burst would
	// fill slow WAN links with superseded copies.
	AdvertiseInterval time.Duration
	// DelayBudgetInterval is how often the delay budgets of the deadline
	// bundles sent on each link are handed to the routing protocol, which
	// re-advertises a link at once when an RTT sample breaks its budget
	// (Kim10 §2.2, docs/design.md §11). A link that carried no deadline
	// bundle in the last interval has no budget.
	DelayBudgetInterval time.Duration

	// SubscriberQueue bounds the deliveries queued per subscriber, in
	// messages and in bytes; beyond either, deliveries to that subscriber
	// are dropped and reported to it as Lost.
	SubscriberQueue      int
	SubscriberQueueBytes int
	// MemoryBudget is the broker's memory budget in bytes (0: none). Half
	// of it bounds what all subscriber queues, link send queues and
	// deliveries being sent hold together: a delivery that would exceed
	// that sheds the oldest deliveries of the subscriber holding the most
	// bytes, reported to it as Lost and counted
	// (drip_subscriber_shed_total); link queues count against it but are
	// never shed for it, having their own bound. The other half is for
	// everything else and the collector's headroom: `drip broker` makes
	// the budget the Go runtime's soft memory limit (docs/design.md §14).
	MemoryBudget int
	// SlowSubscribers says what a full subscriber queue does: publishers
	// wait while the subscriber keeps up, and a subscriber that stalls
	// loses deliveries (see the type).
	SlowSubscribers SlowSubscribers
	// MaxSubscriptions bounds the subscriptions one broker holds.
	MaxSubscriptions int
	// Predicates bound what a subscriber may install.
	Predicates content.Limits
	// Messages bound what a publisher may send.
	Messages wire.MessageLimits

	// Dedup bounds the duplicate filter that passes each message on once
	// while routes disagree (docs/design.md §10).
	Dedup dedup.Config

	// DrainTimeout bounds graceful shutdown: clients moving to other
	// brokers (at most half of it), the withdrawal from the mesh, and the
	// links sending what they hold.
	DrainTimeout time.Duration
	// DrainOverlap is how long a moving subscriber keeps its subscription
	// here after its new one elsewhere is acknowledged: the time the mesh
	// needs to learn the new location (an advertise interval, a PREDICATES
	// rebuild, the flood across the mesh).
	DrainOverlap time.Duration
	// JoinTimeout bounds how long a starting broker with configured peers
	// waits to join the mesh — to be linked both ways to every one of them,
	// each database exchange finished — before it reports itself ready
	// (Joined) anyway, as the first broker of a new mesh, or one whose
	// neighbour is down, must. Either way it is ready only once its
	// PREDICATES index covers the databases it held then, so readiness can
	// come one index build after the timeout. Publish streams wait for it
	// too.
	JoinTimeout time.Duration
	// RerouteGrace bounds how long a withdrawn broker keeps forwarding
	// the bundles still on their way while its neighbours reroute around
	// it. It usually waits far less: each neighbour says when its routes
	// lead around the broker and its last bundle to it has been sent
	// (Frame.finished), and the broker closes once all have.
	RerouteGrace time.Duration
}

// DefaultConfig returns a configuration for broker id with sane defaults:
// LAN link-state timers, Bloom defaults.
func DefaultConfig(id uint32, name string) Config {
	return Config{
		ID:                       id,
		MaxRouterID:              1<<16 - 1,
		Name:                     name,
		Mesh:                     "drip",
		LinkState:                linkstate.DefaultConfig(id, name),
		Encoding:                 encoding.DefaultParams(),
		DRP:                      drp.DefaultConfig(),
		TickInterval:             50 * time.Millisecond,
		PredicateRebuildInterval: 100 * time.Millisecond,
		AdvertiseInterval:        500 * time.Millisecond,
		DelayBudgetInterval:      time.Second,
		SubscriberQueue:          4096,
		SubscriberQueueBytes:     16 << 20,
		// Half the chart's 512 MiB container limit: room for what the
		// budget does not see (goroutine stacks, gRPC's own buffers).
		MemoryBudget: 256 << 20,
		// A send that takes half a second is a client not reading, not a
		// busy broker; two seconds behind is an overload to shed.
		SlowSubscribers:  SlowSubscribers{Stalled: 500 * time.Millisecond, Behind: 2 * time.Second},
		MaxSubscriptions: 100000,
		Predicates:       content.DefaultLimits(),
		Messages:         wire.DefaultMessageLimits(),
		Dedup:            dedup.DefaultConfig(),
		DrainTimeout:     10 * time.Second,
		DrainOverlap:     2 * time.Second,
		RerouteGrace:     3 * time.Second,
		JoinTimeout:      10 * time.Second,
		MatchAll:         MatchAllPolicy{Mode: MatchAllAllow},
	}
}

// Validate reports every problem of c at once.
func (c Config) Validate() error {
	var errs []error
	if c.Name == "" {
		errs = append(errs, errors.New("broker name is empty"))
	}
	if c.Mesh == "" {
		errs = append(errs, errors.New("mesh name is empty"))
	}
	if c.ID > c.MaxRouterID {
		errs = append(errs, fmt.Errorf("router ID %d is beyond the largest router ID %d", c.ID, c.MaxRouterID))
	}
	if c.MatchAll.Mode != "" {
		if err := c.MatchAll.validate(); err != nil {
			errs = append(errs, err)
		}
	}
	seen := map[uint32]bool{}
	for i, p := range c.Peers {
		switch {
		case p.ID == c.ID:
			errs = append(errs, fmt.Errorf("peer %d (%s) has this broker's own ID %d", i, p.Addr, c.ID))
		case seen[p.ID]:
			errs = append(errs, fmt.Errorf("peer %d (%s): router ID %d listed twice", i, p.Addr, p.ID))
		case p.ID > c.MaxRouterID:
			errs = append(errs, fmt.Errorf("peer %d (%s): router ID %d is beyond the largest router ID %d", i, p.Addr, p.ID, c.MaxRouterID))
		case p.Addr == "":
			errs = append(errs, fmt.Errorf("peer %d (router %d) has no address", i, p.ID))
		}
		seen[p.ID] = true
	}
	// The parts' errors name their package ("encoding: ...", "drp: ...",
	// "linkstate: ..."), so they are not wrapped again; the link-state
	// configuration embeds the encoding, so a bad one is reported once.
	encErr := c.Encoding.Validate()
	if encErr != nil {
		errs = append(errs, encErr)
	}
	if err := c.DRP.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Dedup.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("duplicate filter: %w", err))
	}
	if encErr == nil {
		ls := c.linkStateConfig()
		if err := ls.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	durations := []struct {
		name string
		v    time.Duration
	}{
		{"tick interval", c.TickInterval}, {"predicate rebuild interval", c.PredicateRebuildInterval},
		{"advertise interval", c.AdvertiseInterval}, {"delay budget interval", c.DelayBudgetInterval},
		{"drain timeout", c.DrainTimeout}, {"drain overlap", c.DrainOverlap},
	}
	for _, d := range durations {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %v", d.name, d.v))
		}
	}
	// A link's silence is judged only at a tick that follows the previous
	// one within half the silence judged (linkstate's suspect.go).
	if ls := c.LinkState; ls.Keepalive > 0 && ls.SuspectMultiplier > 0 && 2*c.TickInterval > time.Duration(ls.SuspectMultiplier)*ls.Keepalive {
		errs = append(errs, fmt.Errorf("tick interval %v is more than half the silence that makes a link suspect (%d × keepalive %v): no link would ever be suspected; tick more often or keep links alive less often",
			c.TickInterval, ls.SuspectMultiplier, ls.Keepalive))
	}
	positive := []struct {
		name string
		v    int64
	}{
		{"subscriber queue", int64(c.SubscriberQueue)}, {"subscriber queue bytes", int64(c.SubscriberQueueBytes)},
		{"max subscriptions", int64(c.MaxSubscriptions)},
	}
	if c.SlowSubscribers.Stalled <= 0 || c.SlowSubscribers.Block < 0 || c.SlowSubscribers.Behind < 0 {
		errs = append(errs, fmt.Errorf("slow subscribers: stalled %v must be positive, block %v and behind %v not negative",
			c.SlowSubscribers.Stalled, c.SlowSubscribers.Block, c.SlowSubscribers.Behind))
	}
	if c.MemoryBudget < 0 {
		errs = append(errs, fmt.Errorf("memory budget must not be negative (0: none), got %d", c.MemoryBudget))
	}
	if c.JoinTimeout < 0 {
		errs = append(errs, fmt.Errorf("join timeout must not be negative, got %v", c.JoinTimeout))
	}
	if c.RerouteGrace < 0 {
		errs = append(errs, fmt.Errorf("reroute grace must not be negative, got %v", c.RerouteGrace))
	}
	for _, p := range positive {
		if p.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %d", p.name, p.v))
		}
	}
	return errors.Join(errs...)
}

func (c Config) linkStateConfig() linkstate.Config {
	ls := c.LinkState
	ls.ID, ls.Name, ls.Encoding, ls.MaxRouterID = c.ID, c.Name, c.Encoding, c.MaxRouterID
	return ls
}
