package linkstate

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/dripmesh/drip/internal/encoding"
)

// CostMode chooses where a link's advertised cost comes from.
type CostMode uint8

const (
	// CostWeight advertises the weight given to LinkUp, an operator's
	// choice (bandwidth, price) that never changes on its own.
	CostWeight CostMode = iota
	// CostRTT advertises the smoothed round-trip time measured by hellos
	// (Kim10 §2.1), in microseconds, with hysteresis.
	CostRTT
)

// String returns "weight" or "rtt", the spelling used in configuration.
func (m CostMode) String() string {
	switch m {
	case CostWeight:
		return "weight"
	case CostRTT:
		return "rtt"
	}
	return fmt.Sprintf("CostMode(%d)", uint8(m))
}

// Config configures one router's link-state protocol. The zero value is
// invalid; start from DefaultConfig or DefaultWANConfig and change what the
// deployment needs. Every router of a mesh should use the same timers:
// DeadInterval in particular must exceed every neighbour's HelloInterval.
type Config struct {
	// ID identifies the router in every table of the mesh (the StatefulSet
	// ordinal in Kubernetes). It must be unique: two routers with one ID
	// would keep superseding each other's advertisements.
	ID uint32
	// Name is a human-readable label carried in hellos, so that logs and
	// metrics on a neighbour can say who it is talking to. At most 255
	// bytes; it plays no part in routing.
	Name string

	// HelloInterval is how often a hello goes to each neighbour. Hellos
	// both keep adjacencies alive and sample the RTT, so it bounds how fast
	// a dead neighbour or a delay change is noticed.
	HelloInterval time.Duration
	// DeadInterval is how long a neighbour may stay silent — no hello, and
	// no frame of any kind reported by Alive — before its adjacency is
	// dropped. It must be at least twice HelloInterval so that one lost
	// hello never tears down a link.
	DeadInterval time.Duration
	// Keepalive, if not 0, is the longest this router's links stay silent:
	// its link layer sends a frame, if only an empty one, whenever it has
	// sent nothing for Keepalive (transport.LinkConfig.Keepalive). Hellos
	// announce it, so that a neighbour can tell a link that failed from
	// one that is only idle long before DeadInterval (SuspectMultiplier).
	Keepalive time.Duration
	// SuspectMultiplier, if not 0, turns on fast failure detection, BFD's
	// detection multiplier (RFC 5880 §6.8.4): a full adjacency whose
	// neighbour announced a Keepalive, and from which nothing at all — no
	// hello, no frame of any kind (Alive) — has arrived for
	// SuspectMultiplier of those keepalives, is suspect. Its link leaves
	// the router's LSA at once, so the mesh routes around it in tens of
	// milliseconds rather than after DeadInterval, and returns once it is
	// heard again and a probe has measured its RTT, without a new database
	// exchange (suspect.go).
	SuspectMultiplier int
	// RefreshInterval is how often the router re-originates its LSA and
	// predicate advertisement even when nothing changed, so that entries
	// everywhere stay younger than MaxAge and a lost flood heals on its own.
	RefreshInterval time.Duration
	// MaxAge is the age at which another router's entry is dropped from the
	// LSDB when its origin stopped refreshing it (it died, or sits beyond a
	// partition). It must exceed RefreshInterval; OSPF's ratio of about
	// three tolerates two lost refreshes.
	MaxAge time.Duration
	// DigestMismatchHellos is the number of consecutive hellos whose LSDB
	// digest differs from ours after which the lower-ID side of an
	// adjacency starts a database exchange. Flooding in flight makes a
	// single mismatch normal; a persistent one means a message was lost.
	DigestMismatchHellos int

	// CostMode selects configured weights or measured RTT as link costs.
	CostMode CostMode
	// EWMAWeight is the weight of a new RTT sample in the smoothed RTT
	// (Kim10 §2.1 uses 0.25): larger follows changes faster, smaller
	// rides out jitter. In (0, 1].
	EWMAWeight float64
	// CostThreshold is the relative change of the measured cost that makes
	// the router advertise it (Kim10 §2.1 switches paths at a 20%
	// improvement). Below it the old cost stays, so jitter neither floods
	// LSAs nor flaps routes. Zero advertises every change.
	CostThreshold float64
	// CostInterval, when positive, makes measured costs change only at a
	// periodic check every CostInterval (Kim10 §2.1's proactive best path,
	// whose path search runs every 30 s), each cost that moved past
	// CostThreshold advertised then; zero advertises a cost at the sample
	// that moves it past the threshold. A delay budget's violation
	// (SetDelayBudget) is advertised at once either way.
	CostInterval time.Duration
	// CostFloor is the least cost a measured link is advertised with, in
	// microseconds of RTT. RTT differences below it are scheduling noise,
	// and a floor keeps links of a LAN equal so that hop count decides.
	CostFloor uint32

	// Encoding are the Bloom scheme and parameters of this router's
	// predicate advertisements. They travel with every advertisement: a
	// router whose scheme or parameters differ is left out of the
	// published predicate table (EventParamsMismatch), since its filters
	// would match the wrong bits.
	Encoding encoding.Params
	// MaxRouterID, if not 0, is the largest router ID the router accepts:
	// as a neighbour, as the origin of an advertisement or as the far end
	// of a link in one. Per-message state in the data plane is sized by
	// the largest ID known, so a peer must not choose it.
	MaxRouterID uint32
	// MaxFilters, if not 0, bounds the filters of one predicate
	// advertisement, its QoS classes' included: a larger one is refused
	// (LimitError) and neither installed nor flooded, so that no peer can
	// make every broker hold and index whatever it sends. Every broker of
	// a mesh should use the same bound; a router's own advertisement must
	// keep within it (drip coarsens its filters to fit).
	MaxFilters int
	// MaxDatabaseFilters, if not 0, bounds the filters of every
	// predicate advertisement in the database together: one that would
	// take them past it is refused (LimitError). drip derives it from its
	// memory budget, which they are charged to.
	MaxDatabaseFilters int
	// Incarnation, if not 0, is this run of the router: a number that
	// grows with every restart (drip passes its boot time in units of
	// IncarnationUnit). Its advertisements then carry sequence numbers from
	// Incarnation<<IncarnationShift + 1 on, so that whatever an earlier run
	// originated (and signed) is older than the first advertisement of this
	// one: a copy replayed after a restart, even of the whole mesh, is
	// answered with the current one instead of being installed, and the
	// router need not jump past its earlier run's numbers. The database
	// then tells every router each other's incarnation (Table.Incarnation),
	// which the data plane holds bundles' boot epochs to. 0: sequence
	// numbers from 1, as routers before the field.
	Incarnation uint64
	// Auth, if not nil, signs the advertisements this router originates
	// and checks every received one before it is installed, flooded or
	// acted on, so a neighbour cannot speak for other routers. Nil: no
	// signatures, as before (a forged maximum sequence number is then
	// undone by premature aging, flushOwn).
	Auth Authenticator
}

// DefaultConfig is for routers on one site or region: one-second hellos, a
// four-second dead interval (four hellos), configured weights, and OSPF's
// thirty-minute refresh. Refreshes only age out dead routers' entries and
// back up anti-entropy, yet each one re-floods every router's predicate
// over every link: at 1000 routers with 100 filters each, a ten-minute
// refresh alone would cost about 6 kB/s per link (docs/results/routing.md).
func DefaultConfig(id uint32, name string) Config {
	return Config{
		ID:                   id,
		Name:                 name,
		HelloInterval:        time.Second,
		DeadInterval:         4 * time.Second,
		RefreshInterval:      30 * time.Minute,
		MaxAge:               90 * time.Minute,
		DigestMismatchHellos: 2,
		Keepalive:            DefaultKeepalive,
		SuspectMultiplier:    DefaultSuspectMultiplier,
		CostMode:             CostWeight,
		EWMAWeight:           0.25,
		CostThreshold:        0.2,
		CostFloor:            1000,
		Encoding:             encoding.DefaultParams(),
		MaxFilters:           DefaultMaxFilters,
	}
}

// DefaultKeepalive and DefaultSuspectMultiplier suspect a link after a
// second of silence, a quarter of DefaultConfig's dead interval: four
// keepalives, so that a lost or late one, a garbage-collection pause or a
// container's CPU quota running out for most of a 100 ms period never
// reroutes a mesh on its own. The lab's experiments use 20 ms and three
// (docs/results/harmony.md); links then stay silent for at most 20 ms, at
// the cost of about 50 empty frames a second on each idle link.
const (
	DefaultKeepalive         = 250 * time.Millisecond
	DefaultSuspectMultiplier = 4
)

// DefaultMaxFilters is the default bound on the filters of one predicate
// advertisement: an order of magnitude above what brokers of the
// workloads of docs/design.md §2 advertise, and what every broker of a
// mesh can afford to hold and index for each of the others.
const DefaultMaxFilters = 10000

// DefaultWANConfig is for routers across a wide area: RTT costs as in
// Kim10 §2.1 (EWMA 0.25, 20% hysteresis, 1 ms floor), two-second hellos
// and a ten-second dead interval, since a WAN path loses a few hellos in a
// row more often than it fails, and a needless adjacency flap reroutes the
// whole mesh; a link is suspect after two seconds of silence.
func DefaultWANConfig(id uint32, name string) Config {
	c := DefaultConfig(id, name)
	c.HelloInterval = 2 * time.Second
	c.DeadInterval = 10 * time.Second
	// A lost segment on a long path stalls what follows it for a
	// retransmission timeout, and two for twice that.
	c.Keepalive = 500 * time.Millisecond
	c.CostMode = CostRTT
	return c
}

// Validate reports the first field that is out of range.
func (c Config) Validate() error {
	switch {
	case len(c.Name) > 255:
		return fmt.Errorf("linkstate: Config.Name is %d bytes, want at most 255", len(c.Name))
	case c.HelloInterval <= 0:
		return fmt.Errorf("linkstate: Config.HelloInterval = %v, want > 0", c.HelloInterval)
	case c.DeadInterval < 2*c.HelloInterval:
		return fmt.Errorf("linkstate: Config.DeadInterval = %v, want at least 2×HelloInterval = %v so one lost hello does not drop an adjacency",
			c.DeadInterval, 2*c.HelloInterval)
	case c.Keepalive < 0 || c.Keepalive > 0 && c.Keepalive < MinKeepalive:
		return fmt.Errorf("linkstate: Config.Keepalive = %v, want 0 (no keepalives) or at least %v", c.Keepalive, MinKeepalive)
	case c.SuspectMultiplier < 0 || c.SuspectMultiplier == 1 || c.SuspectMultiplier > 100:
		return fmt.Errorf("linkstate: Config.SuspectMultiplier = %d, want 0 (no fast detection) or 2 to 100, so that one late keepalive does not reroute", c.SuspectMultiplier)
	case c.RefreshInterval <= 0:
		return fmt.Errorf("linkstate: Config.RefreshInterval = %v, want > 0", c.RefreshInterval)
	case c.MaxAge <= c.RefreshInterval:
		return fmt.Errorf("linkstate: Config.MaxAge = %v, want more than RefreshInterval = %v or live entries expire",
			c.MaxAge, c.RefreshInterval)
	case c.DigestMismatchHellos < 1:
		return fmt.Errorf("linkstate: Config.DigestMismatchHellos = %d, want at least 1", c.DigestMismatchHellos)
	case c.CostMode != CostWeight && c.CostMode != CostRTT:
		return fmt.Errorf("linkstate: Config.CostMode = %d, want CostWeight or CostRTT", c.CostMode)
	case math.IsNaN(c.EWMAWeight) || c.EWMAWeight <= 0 || c.EWMAWeight > 1:
		return fmt.Errorf("linkstate: Config.EWMAWeight = %v, want a value in (0, 1]", c.EWMAWeight)
	case math.IsNaN(c.CostThreshold) || c.CostThreshold < 0 || math.IsInf(c.CostThreshold, 0):
		return fmt.Errorf("linkstate: Config.CostThreshold = %v, want a finite value ≥ 0", c.CostThreshold)
	case c.CostInterval < 0:
		return fmt.Errorf("linkstate: Config.CostInterval = %v, want ≥ 0 (0: advertise at the threshold)", c.CostInterval)
	case c.CostFloor == 0:
		return errors.New("linkstate: Config.CostFloor = 0, want at least 1 (a zero-cost link makes paths through it free)")
	case c.MaxFilters < 0 || c.MaxDatabaseFilters < 0:
		return fmt.Errorf("linkstate: Config.MaxFilters = %d, MaxDatabaseFilters = %d, want ≥ 0 (0: no bound)", c.MaxFilters, c.MaxDatabaseFilters)
	case c.Incarnation >= 1<<(64-IncarnationShift):
		return fmt.Errorf("linkstate: Config.Incarnation = %d, want less than 2^%d", c.Incarnation, 64-IncarnationShift)
	}
	if err := c.Encoding.Validate(); err != nil {
		return fmt.Errorf("linkstate: Config.Encoding: %w", err)
	}
	return nil
}

// IncarnationShift is where a router's incarnation starts in the sequence
// numbers of its advertisements (Config.Incarnation): the low bits count
// the advertisements of one run, 16 million of them, more than a router
// refreshing every half hour and re-advertising at most twice a second
// originates in three months; one that does overflows into the
// incarnation, which only makes it look a little later.
const IncarnationShift = 24

// IncarnationUnit is the unit of time in which drip counts incarnations:
// a router's incarnation is its boot time, in these units since the Unix
// epoch, which fits the 40 bits left above IncarnationShift for three
// centuries. Two runs of a router started within one unit would share an
// incarnation; a process takes longer to restart.
const IncarnationUnit = 10 * time.Millisecond

// IncarnationOf is the incarnation a sequence number carries (0 for a
// router that does not number its advertisements by incarnation).
func IncarnationOf(seq uint64) uint64 { return seq >> IncarnationShift }
