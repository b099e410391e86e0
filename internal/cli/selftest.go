package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/dripmesh/drip/client"
)

// The self-test's messages carry these attributes. Subscriptions select on
// the token only, so every subscriber matches every message of its run and
// nothing of another run.
const (
	selftestTokenAttr = "drip_selftest"
	selftestFromAttr  = "from"  // index of the --broker the message was published at
	selftestSeqAttr   = "seq"   // check messages: 0..messages-1 per publisher
	selftestProbeAttr = "probe" // true on route probes, absent on check messages
)

type selftestFlags struct {
	conn     connFlags
	brokers  []string
	timeout  time.Duration
	messages int
	settle   time.Duration
	probe    time.Duration
}

func newSelftestCmd() *cobra.Command {
	var f selftestFlags
	cmd := &cobra.Command{
		Use:   "selftest --broker ADDR [--broker ADDR ...]",
		Short: "Check that every given broker delivers to every other, exactly once",
		Long: `Check end-to-end delivery through a running mesh (the Helm chart's test hook
runs it). It subscribes at every given broker with a predicate on a random
token, so that concurrent runs and other traffic do not interfere, then:

  1. publishes route probes at every broker until every subscriber has heard
     from every broker: subscriptions take a moment to be advertised across
     the mesh, and a fresh mesh may still be forming;
  2. publishes --messages check messages at every broker and requires every
     subscriber to receive every one of them exactly once, waiting --settle
     after the last arrival for late duplicates.

It prints one line per check, "ok" or "FAIL", and exits non-zero if any
check failed or --timeout passed first. Give at least two brokers far apart
in the mesh to exercise forwarding.`,
		Example: `  drip selftest --broker drip-0.drip-headless:7000 --broker drip-3.drip-headless:7000
  drip selftest --broker b0:7000 --broker b1:7000 --tls-ca ca.crt --tls-cert tls.crt --tls-key tls.key`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			ctx, cancel := context.WithTimeout(ctx, f.timeout)
			defer cancel()
			return runSelftest(ctx, &f, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	f.conn.register(cmd, "drip-selftest")
	fl.StringArrayVar(&f.brokers, "broker", nil, "address (host:port) of a broker to check; repeat for each broker")
	fl.DurationVar(&f.timeout, "timeout", 30*time.Second, "time allowed for the whole test, connecting included")
	fl.IntVar(&f.messages, "messages", 10, "check messages published at each broker")
	fl.DurationVar(&f.settle, "settle", time.Second, "how long to keep listening for duplicates after the last expected delivery")
	fl.DurationVar(&f.probe, "probe-interval", 200*time.Millisecond, "interval between route probes while waiting for the mesh")
	return cmd
}

func (f *selftestFlags) validate() error {
	switch {
	case len(f.brokers) == 0:
		return errors.New("--broker is required: give the address (host:port) of every broker to check")
	case f.messages < 1:
		return fmt.Errorf("--messages %d: want at least 1", f.messages)
	case f.timeout <= 0:
		return fmt.Errorf("--timeout %v: want a positive duration", f.timeout)
	case f.settle < 0:
		return fmt.Errorf("--settle %v: want zero or more", f.settle)
	case f.probe <= 0:
		return fmt.Errorf("--probe-interval %v: want a positive duration", f.probe)
	}
	for _, b := range f.brokers {
		if b == "" {
			return errors.New("--broker: empty address")
		}
	}
	return nil
}

// selftest is one run against the brokers in f.brokers; index i names the
// i-th --broker both as a publisher and as a subscriber.
type selftest struct {
	f     *selftestFlags
	out   io.Writer
	token string
	n     int

	clients []*client.Client
	subs    []*client.Subscription
	pubs    []*client.Publisher
	labels  []string

	mu       sync.Mutex
	heard    [][]bool  // [sub][pub]: a probe from pub reached sub
	counts   [][][]int // [sub][pub][seq]: check deliveries
	stray    []int     // [sub]: deliveries of this run that are neither probe nor check
	ended    []error   // [sub]: why the subscription ended early
	progress chan struct{}
	expired  atomic.Bool // the timeout has passed; streams ending now are not failures

	failed, checks int
}

func runSelftest(ctx context.Context, f *selftestFlags, out io.Writer) error {
	// Flags that cannot work fail before any broker is dialled.
	if _, err := f.conn.options(); err != nil {
		return err
	}
	var tok [8]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return err
	}
	n := len(f.brokers)
	st := &selftest{
		f: f, out: out, token: hex.EncodeToString(tok[:]), n: n,
		clients: make([]*client.Client, n), subs: make([]*client.Subscription, n),
		pubs: make([]*client.Publisher, n), labels: make([]string, n),
		heard: make([][]bool, n), counts: make([][][]int, n), stray: make([]int, n), ended: make([]error, n),
		progress: make(chan struct{}, 1),
	}
	for j := range n {
		st.heard[j] = make([]bool, n)
		st.counts[j] = make([][]int, n)
		for i := range n {
			st.counts[j][i] = make([]int, f.messages)
		}
	}
	fmt.Fprintf(out, "drip selftest: %s, %s each, token %s\n", Plural(int64(n), "broker", "brokers"),
		Plural(int64(f.messages), "message", "messages"), st.token)
	err := st.run(ctx)
	st.close()
	if err != nil {
		st.report(false, "%v", err)
	}
	if st.failed > 0 {
		return fmt.Errorf("selftest failed: %d of %s", st.failed, Plural(int64(st.checks), "check", "checks"))
	}
	fmt.Fprintf(out, "drip selftest: passed, %s\n", Plural(int64(st.checks), "check", "checks"))
	return nil
}

// report prints one check's outcome.
func (st *selftest) report(ok bool, format string, args ...any) {
	st.checks++
	mark := "ok  "
	if !ok {
		st.failed++
		mark = "FAIL"
	}
	fmt.Fprintf(st.out, "%s %s\n", mark, fmt.Sprintf(format, args...))
}

// run performs the checks; an error means the test could not go on (its
// checks are reported as they fail).
func (st *selftest) run(ctx context.Context) error {
	pred := fmt.Sprintf("%s = %q", selftestTokenAttr, st.token)
	// The streams live in a session without ctx's deadline: gRPC would
	// send the deadline to the brokers, which could end a stream a moment
	// before the local timer fires, and that would look like a broker
	// failing. The session ends when ctx does, after expired is set.
	sess, endSession := context.WithCancel(context.WithoutCancel(ctx))
	defer endSession()
	defer context.AfterFunc(ctx, func() {
		st.expired.Store(true)
		endSession()
	})()
	for i, addr := range st.f.brokers {
		c, err := st.dialRetry(ctx, addr)
		if err != nil {
			st.report(false, "connect to %s: %v", addr, err)
			return errors.New("cannot go on without every broker")
		}
		st.clients[i] = c
		sub, err := c.Subscribe(sess, pred)
		if err != nil {
			st.report(false, "subscribe at %s: %v", addr, err)
			return errors.New("cannot go on without every subscription")
		}
		st.subs[i] = sub
		pub, err := c.NewPublisher(sess)
		if err != nil {
			st.report(false, "open a publish stream at %s: %v", addr, err)
			return errors.New("cannot go on without every publisher")
		}
		st.pubs[i] = pub
		st.report(true, "subscribe at %s: broker %s, subscription %d", addr, sub.Broker(), sub.ID())
	}
	st.nameBrokers()
	var wg sync.WaitGroup
	defer wg.Wait()
	recvCtx, stopReceiving := context.WithCancel(ctx)
	defer stopReceiving()
	for j, sub := range st.subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st.receive(recvCtx, j, sub)
		}()
	}

	start := time.Now()
	if err := st.awaitRoutes(ctx); err != nil {
		st.reportRoutes()
		return err
	}
	st.report(true, "routes: every subscriber hears every broker (after %v)", time.Since(start).Round(time.Millisecond))

	for i, pub := range st.pubs {
		for seq := range st.f.messages {
			m := client.Message{Attrs: client.Attrs{selftestTokenAttr: st.token, selftestFromAttr: i, selftestSeqAttr: seq}}
			if err := pub.Publish(m); err != nil {
				st.report(false, "publish at %s: %v", st.labels[i], err)
				return errors.New("cannot go on without every publisher")
			}
		}
	}
	// Every check message is out; the waiting below is for deliveries, so
	// the streams can end now and say what the brokers accepted.
	for i, pub := range st.pubs {
		sum, err := pub.Close()
		if err != nil {
			st.report(false, "publish at %s: %v", st.labels[i], err)
			continue
		}
		st.report(sum.Accepted == pub.Sent(), "publish at %s: the broker accepted %d of %d messages (probes included)", st.labels[i], sum.Accepted, pub.Sent())
	}
	complete := st.await(ctx, st.complete)
	if complete && st.f.settle > 0 {
		// Duplicates would come right behind the originals.
		settle, cancel := context.WithTimeout(ctx, st.f.settle)
		<-settle.Done()
		cancel()
	}
	stopReceiving()
	wg.Wait()
	st.reportDeliveries()
	switch {
	case complete:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("deliveries incomplete after %v: %w", time.Since(start).Round(time.Millisecond), ctx.Err())
	default:
		return errors.New("a subscription ended early")
	}
}

// nameBrokers labels each --broker by the name its broker gave, or by the
// address when two of them are the same broker.
func (st *selftest) nameBrokers() {
	seen := map[string]int{}
	for _, s := range st.subs {
		seen[s.Broker()]++
	}
	for i, s := range st.subs {
		st.labels[i] = s.Broker()
		if seen[s.Broker()] > 1 || s.Broker() == "" {
			st.labels[i] = st.f.brokers[i]
		}
	}
}

// receive records subscription j's deliveries until ctx ends or the
// subscription does.
func (st *selftest) receive(ctx context.Context, j int, sub *client.Subscription) {
	for {
		d, err := sub.Next(ctx)
		if err != nil {
			if ctx.Err() == nil && !st.expired.Load() {
				st.mu.Lock()
				st.ended[j] = err
				st.mu.Unlock()
				st.notify()
			}
			return
		}
		st.record(j, d.Attrs)
	}
}

func (st *selftest) record(j int, a client.Attrs) {
	from, okFrom := a[selftestFromAttr].(int64)
	st.mu.Lock()
	defer st.mu.Unlock()
	switch seq, okSeq := a[selftestSeqAttr].(int64); {
	case !okFrom || from < 0 || from >= int64(st.n):
		st.stray[j]++
	case a[selftestProbeAttr] == true:
		st.heard[j][from] = true
	case okSeq && seq >= 0 && seq < int64(st.f.messages):
		st.counts[j][from][seq]++
	default:
		st.stray[j]++
	}
	st.notify()
}

func (st *selftest) notify() {
	select {
	case st.progress <- struct{}{}:
	default:
	}
}

// awaitRoutes publishes probes from every broker some subscriber has not
// heard yet, until all have heard all.
func (st *selftest) awaitRoutes(ctx context.Context) error {
	start := time.Now()
	tick := time.NewTicker(st.f.probe)
	defer tick.Stop()
	for {
		st.mu.Lock()
		var missing []int
		for i := range st.n {
			for j := range st.n {
				if !st.heard[j][i] {
					missing = append(missing, i)
					break
				}
			}
		}
		gone := slices.ContainsFunc(st.ended, func(err error) bool { return err != nil })
		st.mu.Unlock()
		if len(missing) == 0 {
			return nil
		}
		if gone {
			return errors.New("a subscription ended early")
		}
		for _, i := range missing {
			m := client.Message{Attrs: client.Attrs{selftestTokenAttr: st.token, selftestFromAttr: i, selftestProbeAttr: true}}
			if err := st.pubs[i].Publish(m); err != nil && !st.expired.Load() {
				return fmt.Errorf("publish a probe at %s: %w", st.labels[i], err)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("routes incomplete after %v: %w", time.Since(start).Round(time.Millisecond), ctx.Err())
		case <-tick.C:
		}
	}
}

// await waits until done holds (checked under st.mu), a subscription ends,
// or ctx ends.
func (st *selftest) await(ctx context.Context, done func() bool) bool {
	for {
		st.mu.Lock()
		ok := done()
		gone := slices.ContainsFunc(st.ended, func(err error) bool { return err != nil })
		st.mu.Unlock()
		if ok {
			return true
		}
		if gone {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-st.progress:
		}
	}
}

// complete reports whether every subscriber has every check message.
func (st *selftest) complete() bool {
	for j := range st.n {
		for i := range st.n {
			if slices.Contains(st.counts[j][i], 0) {
				return false
			}
		}
	}
	return true
}

func (st *selftest) reportRoutes() {
	st.mu.Lock()
	defer st.mu.Unlock()
	for j := range st.n {
		if err := st.ended[j]; err != nil {
			st.report(false, "subscription at %s ended: %v", st.labels[j], err)
		}
		var deaf []string
		for i := range st.n {
			if !st.heard[j][i] {
				deaf = append(deaf, st.labels[i])
			}
		}
		if len(deaf) > 0 {
			st.report(false, "routes: subscriber at %s has not heard from %s", st.labels[j], strings.Join(deaf, ", "))
		}
	}
}

// reportDeliveries prints one line per publisher/subscriber pair.
func (st *selftest) reportDeliveries() {
	st.mu.Lock()
	defer st.mu.Unlock()
	for i := range st.n {
		for j := range st.n {
			var missing, dups []string
			got := 0
			for seq, c := range st.counts[j][i] {
				switch {
				case c == 0:
					missing = append(missing, strconv.Itoa(seq))
				case c > 1:
					dups = append(dups, fmt.Sprintf("%d×%d", seq, c))
				}
				if c > 0 {
					got++
				}
			}
			line := fmt.Sprintf("%s → %s: %d/%s", st.labels[i], st.labels[j], got, Plural(int64(st.f.messages), "message", "messages"))
			if len(missing) > 0 {
				line += ", missing seq " + abbreviate(missing)
			}
			if len(dups) > 0 {
				line += ", duplicated seq " + abbreviate(dups)
			}
			if len(missing) == 0 && len(dups) == 0 {
				line += ", each exactly once"
			}
			st.report(len(missing) == 0 && len(dups) == 0, "%s", line)
		}
	}
	for j, sub := range st.subs {
		if st.stray[j] > 0 {
			st.report(false, "subscriber at %s: %d deliveries that no publisher of this run sent", st.labels[j], st.stray[j])
		}
		if lost := sub.Lost(); lost > 0 {
			st.report(false, "subscriber at %s: the broker dropped %d deliveries (subscriber queue full)", st.labels[j], lost)
		}
		if err := st.ended[j]; err != nil {
			st.report(false, "subscription at %s ended: %v", st.labels[j], err)
		}
	}
}

// abbreviate joins up to ten items.
func abbreviate(items []string) string {
	if len(items) <= 10 {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:10], ", ") + fmt.Sprintf(" and %d more", len(items)-10)
}

func (st *selftest) close() {
	for _, p := range st.pubs {
		if p != nil {
			_, _ = p.Close()
		}
	}
	for _, s := range st.subs {
		if s != nil {
			_ = s.Close()
		}
	}
	for _, c := range st.clients {
		if c != nil {
			_ = c.Close()
		}
	}
}

// dialRetry connects to addr, retrying until ctx ends: right after a Helm
// install the brokers' DNS names may not resolve yet, and CoreDNS caches
// the "no such host" for up to 30 s.
func (st *selftest) dialRetry(ctx context.Context, addr string) (*client.Client, error) {
	for {
		c, err := st.f.conn.dial(ctx, addr)
		if err == nil || ctx.Err() != nil {
			return c, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(time.Second):
		}
	}
}
