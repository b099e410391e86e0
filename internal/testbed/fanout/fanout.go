package fanout

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/client"
)

// Config is one run.
type Config struct {
	// Drip is the drip binary whose broker is measured.
	Drip string
	// Budget is the broker's --memory-budget in bytes (0: none; negative:
	// the flag is not passed, for brokers that predate it).
	Budget int
	// Subscribers and Publishers are the clients; subscriber i asks for
	// group i mod Groups, and each message goes to one group, so a message
	// fans out to Subscribers/Groups subscribers.
	Subscribers, Publishers, Groups int
	// SlowEvery makes every SlowEvery-th subscriber one that never reads
	// its stream (0: none): its broker queue fills and stays full.
	SlowEvery int
	// Rate is the messages per second all publishers send together, each
	// with Payload bytes.
	Rate    float64
	Payload int
	// Duration is how long the publishers send; Sample how often the
	// broker's RSS is read.
	Duration, Sample time.Duration
	// Conns is how many gRPC connections the subscribers share.
	Conns int
	// BrokerArgs are flags added to the broker's command line (--pprof,
	// for instance, to look inside a run).
	BrokerArgs []string
}

// DefaultConfig is issue 17's probe: 2,000 subscribers and 200 publishers,
// a tenth of the subscribers never reading.
func DefaultConfig() Config {
	return Config{Subscribers: 2000, Publishers: 200, Groups: 20, SlowEvery: 10, Rate: 2000, Payload: 4 << 10,
		Duration: 60 * time.Second, Sample: 500 * time.Millisecond, Conns: 20}
}

// Sample is one reading of the broker, T seconds after the publishers
// started.
type Sample struct {
	T        float64 `json:"t_s"`
	RSS      int64   `json:"rss_bytes"`
	Budget   int64   `json:"budget_used_bytes"`
	Sent     int64   `json:"sent"`
	Received int64   `json:"received"`
	// Heap is the Go heap in use and Goroutines the broker's goroutines
	// (-1 when its metrics did not answer): what RSS holds beside the
	// queues.
	Heap       int64 `json:"heap_inuse_bytes"`
	Goroutines int64 `json:"goroutines"`
}

// Result is a run's samples and totals.
type Result struct {
	Config   Config   `json:"config"`
	Samples  []Sample `json:"samples"`
	MaxRSS   int64    `json:"max_rss_bytes"`
	Sent     int64    `json:"sent"`
	Received int64    `json:"received"`
	// Accepted is what the broker acknowledged when the publishers
	// closed, and CloseSeconds how long closing took after Duration: a
	// broker that cannot keep up makes its publishers wait (flow control)
	// instead of buffering what they send, and they close only once it
	// has taken what they had queued.
	Accepted     uint64  `json:"accepted"`
	CloseSeconds float64 `json:"close_s"`
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Run starts the broker, drives the load and samples the broker until
// Duration has passed. Progress lines go to log.
func Run(ctx context.Context, cfg Config, log io.Writer) (*Result, error) {
	if cfg.Drip == "" || cfg.Subscribers <= 0 || cfg.Publishers <= 0 || cfg.Groups <= 0 || cfg.Rate <= 0 || cfg.Conns <= 0 {
		return nil, fmt.Errorf("fanout: drip binary %q, subscribers %d, publishers %d, groups %d, rate %v, conns %d: all are required and positive",
			cfg.Drip, cfg.Subscribers, cfg.Publishers, cfg.Groups, cfg.Rate, cfg.Conns)
	}
	var ports [3]int
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	metrics := fmt.Sprintf("127.0.0.1:%d", ports[2])
	bctx, stopBroker := context.WithCancel(ctx)
	defer stopBroker()
	args := []string{"broker", "--name", "b0", "--id", "1",
		"--client-addr", addr, "--peer-addr", fmt.Sprintf("127.0.0.1:%d", ports[1]), "--metrics-addr", metrics, "--log-level", "warn"}
	if cfg.Budget >= 0 {
		args = append(args, "--memory-budget", strconv.Itoa(cfg.Budget))
	}
	args = append(args, cfg.BrokerArgs...)
	cmd := exec.CommandContext(bctx, cfg.Drip, args...)
	cmd.Stderr = log
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 15 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("fanout: starting %s broker: %w", cfg.Drip, err)
	}
	defer func() { stopBroker(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid

	// Fixed 64 KiB stream windows: a stream that is not read holds no
	// more than that in the broker's sockets and this process.
	dial := func() (*grpc.ClientConn, error) {
		return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(4<<20))
	}
	conns := make([]*grpc.ClientConn, cfg.Conns)
	for i := range conns {
		c, err := dial()
		if err != nil {
			return nil, err
		}
		defer c.Close()
		conns[i] = c
	}
	if err := waitServing(ctx, conns[0]); err != nil {
		return nil, fmt.Errorf("fanout: broker at %s: %w", addr, err)
	}

	sctx, stopSubs := context.WithCancel(ctx)
	defer stopSubs()
	var received atomic.Int64
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopSubs()
	for i := range cfg.Subscribers {
		stream, err := dripv1.NewBrokerClient(conns[i%len(conns)]).Subscribe(sctx)
		if err != nil {
			return nil, fmt.Errorf("fanout: subscriber %d: %w", i, err)
		}
		if err := stream.Send(&dripv1.SubscribeRequest{Predicate: &dripv1.Predicate{Text: fmt.Sprintf("g = %d", i%cfg.Groups)}, ClientName: "fanout", AcceptBatches: true}); err != nil {
			return nil, fmt.Errorf("fanout: subscriber %d: %w", i, err)
		}
		if _, err := stream.Recv(); err != nil {
			return nil, fmt.Errorf("fanout: subscriber %d: %w", i, err)
		}
		if cfg.SlowEvery > 0 && i%cfg.SlowEvery == 0 {
			continue // never reads again
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if _, err := stream.Recv(); err != nil {
					return
				}
				received.Add(1)
			}
		}()
	}
	fmt.Fprintf(log, "fanout: %d subscribers on %s (every %dth never reads)\n", cfg.Subscribers, addr, cfg.SlowEvery)
	time.Sleep(time.Second) // the broker's advertisement; a single broker needs none, but its queues settle

	pc, err := client.Dial(ctx, addr, client.WithName("fanout"))
	if err != nil {
		return nil, err
	}
	defer pc.Close()
	var sent atomic.Int64
	// Every publisher is open before Duration starts: on a loaded machine
	// opening 200 takes a while, and the run measures their sending.
	pubs := make([]*client.Publisher, cfg.Publishers)
	for k := range pubs {
		if pubs[k], err = pc.NewPublisher(ctx); err != nil {
			return nil, err
		}
	}
	pctx, stopPubs := context.WithTimeout(ctx, cfg.Duration)
	defer stopPubs()
	payload := make([]byte, cfg.Payload)
	every := time.Duration(float64(time.Second) * float64(cfg.Publishers) / cfg.Rate)
	var (
		pwg      sync.WaitGroup
		accepted atomic.Uint64
	)
	for k, p := range pubs {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			defer func() {
				sum, _ := p.Close() // an error leaves Accepted short, which the report shows
				accepted.Add(sum.Accepted)
			}()
			tick := time.NewTicker(every)
			defer tick.Stop()
			for n := 0; ; n++ {
				select {
				case <-pctx.Done():
					return
				case <-tick.C:
				}
				if p.Publish(client.Message{Attrs: client.Attrs{"g": (k + n) % cfg.Groups, "k": k}, Payload: payload}) != nil {
					return
				}
				sent.Add(1)
			}
		}()
	}

	res := &Result{Config: cfg}
	start := time.Now()
	tick := time.NewTicker(cfg.Sample)
	defer tick.Stop()
	for pctx.Err() == nil {
		select {
		case <-pctx.Done():
		case <-tick.C:
		}
		rss, err := vmRSS(pid)
		if err != nil {
			return res, fmt.Errorf("fanout: broker exited? %w", err)
		}
		g := scrape(metrics, "drip_memory_budget_used_bytes", "go_memstats_heap_inuse_bytes", "go_goroutines")
		s := Sample{T: time.Since(start).Seconds(), RSS: rss, Budget: g[0], Heap: g[1], Goroutines: g[2],
			Sent: sent.Load(), Received: received.Load()}
		res.Samples = append(res.Samples, s)
		res.MaxRSS = max(res.MaxRSS, rss)
		if len(res.Samples)%10 == 0 {
			fmt.Fprintf(log, "fanout: %5.1fs rss %4d MiB, heap %4d MiB, budget used %4d MiB, %d goroutines, sent %d, received %d\n",
				s.T, s.RSS>>20, s.Heap>>20, s.Budget>>20, s.Goroutines, s.Sent, s.Received)
		}
	}
	closing := time.Now()
	fmt.Fprintf(log, "fanout: publishers closing: they wait until the broker has taken what they queued\n")
	pwg.Wait()
	res.CloseSeconds = time.Since(closing).Seconds()
	res.Sent, res.Received, res.Accepted = sent.Load(), received.Load(), accepted.Load()
	return res, nil
}

// waitServing waits until the broker answers on conn.
func waitServing(ctx context.Context, conn *grpc.ClientConn) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		stream, err := dripv1.NewBrokerClient(conn).Subscribe(ctx)
		if err == nil {
			if err = stream.Send(&dripv1.SubscribeRequest{Predicate: &dripv1.Predicate{Text: "probe exists"}}); err == nil {
				if _, err = stream.Recv(); err == nil {
					return stream.CloseSend()
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not serving within 10 s: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// vmRSS reads a process's resident set from /proc/PID/status.
func vmRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS line")
}

// scrape reads unlabelled gauges from one fetch of the broker's /metrics,
// in the order named (-1 for one it cannot read): a sample on a starved
// machine should cost the broker one scrape, not one per gauge.
func scrape(addr string, names ...string) []int64 {
	out := make([]int64, len(names))
	for i := range out {
		out[i] = -1
	}
	c := net.Dialer{Timeout: time.Second}
	conn, err := c.Dial("tcp", addr)
	if err != nil {
		return out
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	fmt.Fprintf(conn, "GET /metrics HTTP/1.0\r\nHost: %s\r\n\r\n", addr)
	sc := bufio.NewScanner(conn)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		for i, name := range names {
			if rest, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
				if v, err := strconv.ParseFloat(rest, 64); err == nil {
					out[i] = int64(v)
				}
			}
		}
	}
	return out
}
