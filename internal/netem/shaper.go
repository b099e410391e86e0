package netem

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/dripmesh/drip/internal/topology"
)

// Resolver looks up a host's addresses; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Config configures a Shaper.
type Config struct {
	// Load returns the topology. It is called every pass, so an edited
	// file (a ConfigMap in Kubernetes) takes effect without a restart; on
	// failure the last topology loaded is kept.
	Load func() (*topology.Topology, error)
	// Self names the broker whose egress is shaped.
	Self string
	// TC is the device to program.
	TC TC
	// Resolver resolves neighbours' names (default net.DefaultResolver).
	Resolver Resolver
	// Interval between passes (default 10s): how soon a neighbour that
	// moved to a new address is shaped again.
	Interval time.Duration
	// ResolveTimeout bounds one name lookup (default 5s).
	ResolveTimeout time.Duration
	// Strict makes a missing netem a fatal error instead of shaping the
	// rate only.
	Strict  bool
	Log     *zap.Logger // default: no logging
	Metrics *Metrics    // default: unregistered
}

// Shaper keeps a device shaped as the topology says: every pass it
// resolves the neighbours, plans and reconciles. One goroutine drives it.
type Shaper struct {
	cfg  Config
	log  *zap.Logger
	m    *Metrics
	topo *topology.Topology // last loaded
	// addrs is each neighbour's last resolved addresses, kept when a
	// lookup fails: a pod being rescheduled is briefly unresolvable, and
	// shaping its old address is better than not shaping it.
	addrs   map[string][]netip.Addr
	noNetem bool
	// reported is the last shaping logged per neighbour, and warned the
	// plan warnings logged, so each is logged once, not every pass.
	reported map[string]string
	warned   map[string]bool
}

// NewShaper checks cfg and fills in defaults.
func NewShaper(cfg Config) (*Shaper, error) {
	if cfg.Load == nil || cfg.TC == nil || cfg.Self == "" {
		return nil, errors.New("netem: Config needs Load, TC and Self")
	}
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 10 * time.Second
	}
	if cfg.ResolveTimeout <= 0 {
		cfg.ResolveTimeout = 5 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	cfg.TC = loggingTC{TC: cfg.TC, log: cfg.Log}
	return &Shaper{
		cfg: cfg, log: cfg.Log, m: cfg.Metrics,
		addrs: map[string][]netip.Addr{}, reported: map[string]string{}, warned: map[string]bool{},
	}, nil
}

// Fatal tells whether an error from Apply will not go away by retrying:
// the device's root belongs to someone else, or netem is missing under
// Config.Strict.
func Fatal(err error) bool {
	return errors.Is(err, ErrForeignRoot) || errors.Is(err, ErrNetemUnsupported)
}

// Run removes what a previous run left, then applies a pass every
// interval until ctx ends, and finally removes everything it installed.
// It returns early only on a Fatal error (after the same cleanup).
func (s *Shaper) Run(ctx context.Context) error {
	if err := s.Clean(); err != nil {
		return err
	}
	tick := time.NewTicker(s.cfg.Interval)
	defer tick.Stop()
	for {
		_, err := s.Apply(ctx)
		switch {
		case Fatal(err):
			return errors.Join(err, s.Clean())
		case err != nil:
			s.log.Error("shaping pass failed; retrying next interval", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return s.Clean()
		case <-tick.C:
		}
	}
}

// Clean removes drip's root qdisc, and with it everything drip installed
// on the device, if there is one.
func (s *Shaper) Clean() error {
	removed, err := Remove(s.cfg.TC)
	if err != nil {
		s.m.errors.WithLabelValues(StageCleanup).Inc()
		return fmt.Errorf("netem: remove drip's qdiscs: %w", err)
	}
	if removed {
		s.log.Info("removed drip's qdiscs", zap.String("root", HandleString(RootHandle)))
	}
	s.m.links.Set(0)
	return nil
}

// Apply makes one pass: load the topology, resolve the neighbours, plan
// and reconcile. When the kernel turns out to lack netem it replans
// without impairments in the same pass (or fails, under Strict).
func (s *Shaper) Apply(ctx context.Context) (Plan, error) {
	t, err := s.cfg.Load()
	switch {
	case err == nil:
		s.topo = t
	case s.topo == nil:
		s.m.errors.WithLabelValues(StageTopology).Inc()
		return Plan{}, fmt.Errorf("netem: %w", err)
	default:
		s.m.errors.WithLabelValues(StageTopology).Inc()
		s.log.Warn("topology unreadable; keeping the last one", zap.Error(err))
	}
	s.resolve(ctx)

	plan, changes, err := s.reconcile()
	if errors.Is(err, ErrNetemUnsupported) && !s.noNetem {
		if s.cfg.Strict {
			return plan, fmt.Errorf("netem: --strict: %w", err)
		}
		s.noNetem = true
		s.log.Warn("the kernel has no netem qdisc (sch_netem): links are shaped to their bandwidth only, without delay, jitter or loss")
		var more int
		plan, more, err = s.reconcile()
		changes += more
	}
	s.m.changes.Add(float64(changes))
	if err != nil {
		return plan, err
	}
	s.m.reconciles.Inc()
	s.report(plan, changes)
	return plan, nil
}

func (s *Shaper) reconcile() (Plan, int, error) {
	plan, err := NewPlan(Input{Topology: s.topo, Self: s.cfg.Self, Addrs: s.addrs, NoNetem: s.noNetem})
	if err != nil {
		s.m.errors.WithLabelValues(StagePlan).Inc()
		return plan, 0, err
	}
	n, err := Reconcile(s.cfg.TC, plan.State)
	if err != nil && !errors.Is(err, ErrNetemUnsupported) {
		s.m.errors.WithLabelValues(StageReconcile).Inc()
	}
	return plan, n, err
}

// resolve refreshes each neighbour's addresses; IP literals need no
// lookup.
func (s *Shaper) resolve(ctx context.Context) {
	current := map[string]bool{}
	for _, n := range s.topo.Neighbors(s.cfg.Self) {
		name := n.Broker.Name
		current[name] = true
		host := PeerHost(n.Broker)
		if host == "" {
			s.warnOnce("neighbour " + name + " has no peer or client address; its traffic cannot be told apart")
			continue
		}
		var addrs []netip.Addr
		if a, err := netip.ParseAddr(host); err == nil {
			addrs = []netip.Addr{a}
		} else {
			lctx, cancel := context.WithTimeout(ctx, s.cfg.ResolveTimeout)
			addrs, err = s.cfg.Resolver.LookupNetIP(lctx, "ip", host)
			cancel()
			if err != nil || len(addrs) == 0 {
				s.m.errors.WithLabelValues(StageResolve).Inc()
				s.log.Warn("neighbour did not resolve; keeping its last addresses",
					zap.String("peer", name), zap.String("host", host), zap.Error(err), zap.String("kept", addrList(s.addrs[name])))
				continue
			}
		}
		addrs = normalize(addrs)
		if old, ok := s.addrs[name]; ok && !slices.Equal(old, addrs) {
			s.log.Info("neighbour moved", zap.String("peer", name), zap.String("from", addrList(old)), zap.String("to", addrList(addrs)))
		}
		s.addrs[name] = addrs
	}
	for name := range s.addrs {
		if !current[name] {
			delete(s.addrs, name)
		}
	}
}

// report logs each neighbour's shaping when it changes (one line per
// neighbour, a warning naming what could not be applied) and updates the
// gauges.
func (s *Shaper) report(plan Plan, changes int) {
	if changes > 0 {
		s.log.Info("device reconciled", zap.Int("changes", changes), zap.Int("links", len(plan.Peers)))
	} else {
		s.log.Debug("device already as planned", zap.Int("links", len(plan.Peers)))
	}
	for _, w := range plan.Warnings {
		s.warnOnce(w)
	}
	unsupported := map[Feature]bool{}
	seen := map[string]bool{}
	for _, p := range plan.Peers {
		seen[p.Name] = true
		for _, f := range p.Missing {
			unsupported[f] = true
		}
		summary := fmt.Sprintf("%d %v %v %v", p.Rate, p.Impairment, p.Addrs, p.Missing)
		if s.reported[p.Name] == summary {
			continue
		}
		s.reported[p.Name] = summary
		fields := []zap.Field{
			zap.String("peer", p.Name), zap.Uint32("id", p.ID), zap.String("class", HandleString(p.Class)),
			zap.String("rate", rateString(p.Rate)), zap.String("addrs", addrList(p.Addrs)),
		}
		if len(p.Missing) == 0 {
			s.log.Info("shaping link", append(fields, zap.Stringer("impairment", p.Impairment))...)
			continue
		}
		var parts []string
		for _, f := range p.Missing {
			switch f {
			case FeatureDelay:
				parts = append(parts, "delay "+p.Impairment.Delay.String())
			case FeatureJitter:
				parts = append(parts, "jitter "+p.Impairment.Jitter.String())
			case FeatureLoss:
				parts = append(parts, fmt.Sprintf("loss %g%%", p.Impairment.Loss*100))
			}
		}
		s.log.Warn("shaping link without netem: not applied: "+strings.Join(parts, ", "),
			append(fields, zap.Strings("not_applied", featureNames(p.Missing)))...)
	}
	for name := range s.reported {
		if !seen[name] {
			delete(s.reported, name)
		}
	}
	s.m.links.Set(float64(len(plan.Peers)))
	for _, f := range Features {
		v := 0.0
		if unsupported[f] {
			v = 1
		}
		s.m.unsupported.WithLabelValues(string(f)).Set(v)
	}
}

func (s *Shaper) warnOnce(msg string) {
	if !s.warned[msg] {
		s.warned[msg] = true
		s.log.Warn(msg)
	}
}

func featureNames(fs []Feature) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = string(f)
	}
	return out
}

func addrList(as []netip.Addr) string {
	parts := make([]string, len(as))
	for i, a := range as {
		parts[i] = a.String()
	}
	return strings.Join(parts, ",")
}

// rateString writes a rate as the topology file does ("2MBps").
func rateString(r uint64) string {
	v, unit := float64(r), "Bps"
	switch {
	case r == 0:
		return "unlimited"
	case r >= 1e9:
		v, unit = v/1e9, "GBps"
	case r >= 1e6:
		v, unit = v/1e6, "MBps"
	case r >= 1e3:
		v, unit = v/1e3, "KBps"
	}
	return strconv.FormatFloat(v, 'f', -1, 64) + unit
}
