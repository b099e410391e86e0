package e2e

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Image load modes: how the image under test reaches the cluster's nodes.
const (
	loadAuto = "auto" // kind when the suite creates the cluster, none with -kubeconfig
	loadKind = "kind" // build with docker and load into the kind cluster's nodes
	loadCtr  = "ctr"  // import an image archive with ctr on this machine (a single-node cluster here)
	loadNone = "none" // the cluster already has the image, or pulls it
)

// options are the suite's flags.
type options struct {
	enabled      bool // -e2e: run the cluster tests
	kubeconfig   string
	image        string
	keep         bool
	load         string
	build        bool
	imageArchive string
	kindName     string
	kindImage    string

	// scenario selects the cluster tests: mesh (TestMesh), multisite
	// (TestMultiSite) or all.
	scenario  string
	mesh      meshSpec
	bench     benchSpec
	multiSite multiSiteSpec

	maxConvergence time.Duration // -max-convergence
	ramp           rampSpec
	doRamp         bool // -ramp
	rampPlain      bool // -ramp-plain: ramp again without netem
	restart        restartSpec
	doRestart      bool   // -restart
	results        string // -results: where the suite keeps its JSON and plot
}

var opts = options{scenario: scenarioMesh, mesh: defaultMesh(), bench: defaultBench(), multiSite: defaultMultiSite(), maxConvergence: 5 * time.Second,
	ramp: defaultRamp(), doRamp: true, rampPlain: true, restart: defaultRestart(), doRestart: true}

func init() {
	flag.BoolVar(&opts.enabled, "e2e", false, "run the cluster tests (make e2e sets it); without it, or -kubeconfig, `go test ./...` never creates a cluster")
	flag.StringVar(&opts.kubeconfig, "kubeconfig", "", "kubeconfig `file` of an existing cluster to test in (its current context); empty: create a kind cluster. $KUBECONFIG is never read, so the suite cannot install into whatever cluster a shell points at")
	flag.StringVar(&opts.image, "image", "drip:dev", "drip image `ref` (repository:tag) the chart runs")
	flag.BoolVar(&opts.keep, "keep", false, "keep the release, its namespace and a created kind cluster after the run")
	flag.StringVar(&opts.load, "load", loadAuto, "how the image reaches the nodes: kind, ctr, none, or auto (kind for a created cluster, none with -kubeconfig)")
	flag.BoolVar(&opts.build, "build", true, "build the image from deploy/Dockerfile first (-load kind, and -load ctr without -image-archive)")
	flag.StringVar(&opts.imageArchive, "image-archive", "", "image archive `file` for -load ctr; empty: produce one with the image archiver (docker build and save by default)")
	flag.StringVar(&opts.kindName, "kind-name", "", "name of the kind cluster to create, or to load the image into with -kubeconfig and -load kind (default: a fresh drip-e2e-* to create, or the kubeconfig's kind-NAME context)")
	flag.StringVar(&opts.kindImage, "kind-image", "", "kind node image `ref`; empty: kind's default")

	flag.StringVar(&opts.scenario, "scenario", opts.scenario, "cluster tests to run: mesh (TestMesh: one release), multisite (TestMultiSite: a mesh of releases in separate namespaces, one site each), or all")
	ms := &opts.multiSite
	flag.IntVar(&ms.Sites, "sites", ms.Sites, "multisite: sites, one release and namespace each (the last is deleted and reinstalled under load)")
	flag.IntVar(&ms.Brokers, "site-brokers", ms.Brokers, "multisite: brokers per site")
	flag.DurationVar(&ms.Survive, "site-loss-duration", ms.Survive, "multisite: sending time of the bench among the other sites while the last is deleted and reinstalled; must outlast both")

	m, b := &opts.mesh, &opts.bench
	flag.IntVar(&m.Brokers, "brokers", m.Brokers, "brokers in the mesh")
	flag.StringVar(&m.Shape, "shape", m.Shape, "topology shape: fullmesh, ring or line")
	flag.BoolVar(&m.Netem, "netem", m.Netem, "run the netem sidecar to shape the links")
	flag.StringVar(&m.Bandwidth, "bandwidth", m.Bandwidth, "egress bandwidth per link direction (netem)")
	flag.StringVar(&m.Delay, "delay", m.Delay, "one-way delay per link (netem)")
	flag.StringVar(&m.Jitter, "jitter", m.Jitter, "delay jitter per link (netem)")
	flag.StringVar(&m.Loss, "loss", m.Loss, "packet loss per link, e.g. 0.1% (netem)")
	flag.IntVar(&b.Subscribers, "subscribers", b.Subscribers, "bench: subscribers")
	flag.IntVar(&b.Publishers, "publishers", b.Publishers, "bench: publishers")
	flag.Float64Var(&b.MinDelivery, "min-delivery", b.MinDelivery, "bench: least fraction of the ideal deliveries that must arrive")

	flag.DurationVar(&opts.maxConvergence, "max-convergence", opts.maxConvergence, "longest time from the last broker's start until every broker knows every router")
	r, rs := &opts.ramp, &opts.restart
	flag.BoolVar(&opts.doRamp, "ramp", opts.doRamp, "run the throughput ramp")
	flag.BoolVar(&opts.rampPlain, "ramp-plain", opts.rampPlain, "with -netem, upgrade the release without netem afterwards and ramp again")
	flag.Float64Var(&r.Start, "ramp-start", r.Start, "ramp: offered rate of the first step, messages per second (the bench's -min-delivery applies to it)")
	flag.Float64Var(&r.Factor, "ramp-factor", r.Factor, "ramp: each step offers this times the last")
	flag.IntVar(&r.Steps, "ramp-steps", r.Steps, "ramp: at most this many steps, one bench Job each")
	flag.DurationVar(&r.Step, "ramp-step", r.Step, "ramp: sending time of a step")
	flag.Float64Var(&r.MinRatio, "ramp-min-ratio", r.MinRatio, "ramp: a sustained step delivers at least this fraction of the ideal")
	flag.DurationVar(&r.MaxP99, "ramp-max-p99", r.MaxP99, "ramp: a sustained step's latency p99 is at most this")
	flag.BoolVar(&opts.doRestart, "restart", opts.doRestart, "roll every broker (kubectl rollout restart) during a bench and require exactly-once delivery")
	flag.Float64Var(&rs.Rate, "restart-rate", rs.Rate, "restart: messages per second during the rollout")
	flag.DurationVar(&rs.Duration, "restart-duration", rs.Duration, "restart: the bench's sending time, which must outlast the rollout")
	flag.Float64Var(&rs.KnownLoss, "restart-known-loss", rs.KnownLoss, "restart: fraction of the ideal deliveries that may be lost with the signature of the old loss around drains and rejoins (docs/kubernetes.md, rolling restart), when restarted brokers counted no_route; 0 (the default) requires every delivery")
	flag.IntVar(&opts.mesh.DrainOverlapSeconds, "drain-overlap", 0, "the chart's broker.drainOverlapSeconds; 0: the chart's default")
	flag.StringVar(&opts.results, "results", "", "`dir`ectory for the results the suite keeps (e2e.json, ramp.png); empty: test/e2e/results")
}

func (o *options) validate() error {
	switch o.load {
	case loadAuto, loadKind, loadCtr, loadNone:
	default:
		return fmt.Errorf("-load %q: want kind, ctr, none or auto", o.load)
	}
	if o.load == loadCtr && o.kubeconfig == "" {
		return errors.New("-load ctr imports into this machine's containerd, so it needs -kubeconfig of a cluster whose node is this machine")
	}
	if o.kubeconfig == "" && o.load == loadNone {
		return errors.New("-load none with a kind cluster the suite creates: the fresh cluster has no drip image; use -load kind")
	}
	switch o.scenario {
	case scenarioMesh, scenarioMultiSite, scenarioAll:
	default:
		return fmt.Errorf("-scenario %q: want mesh, multisite or all", o.scenario)
	}
	if err := o.multiSite.validate(); err != nil {
		return err
	}
	if _, err := parseImageRef(o.image); err != nil {
		return fmt.Errorf("-image: %w", err)
	}
	if err := o.mesh.validate(); err != nil {
		return err
	}
	if err := o.ramp.validate(); err != nil {
		return err
	}
	if err := o.restart.validate(); err != nil {
		return err
	}
	return o.bench.validate()
}

// The scenarios -scenario selects.
const (
	scenarioMesh      = "mesh"
	scenarioMultiSite = "multisite"
	scenarioAll       = "all"
)

// runs says whether -scenario selects scenario.
func (o *options) runs(scenario string) bool {
	return o.scenario == scenarioAll || o.scenario == scenario
}

// loadMode resolves loadAuto.
func (o *options) loadMode() string {
	if o.load != loadAuto {
		return o.load
	}
	if o.kubeconfig == "" {
		return loadKind
	}
	return loadNone
}

// theSuite is the cluster every test shares.
var theSuite = &suite{}

func TestMain(m *testing.M) {
	flag.Parse()
	stop := finishOnSignal()
	code := m.Run()
	stop()
	theSuite.mu.Lock()
	if len(theSuite.failures) > 0 {
		fmt.Fprintf(os.Stderr, "e2e: what failed, repeated from above:\n")
		for _, f := range theSuite.failures {
			fmt.Fprintf(os.Stderr, "  %s\n", f)
		}
	}
	theSuite.mu.Unlock()
	if err := theSuite.finish(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: finish: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// finishOnSignal tears the suite down when the run is interrupted: a kind
// cluster left behind costs gigabytes of memory until someone notices.
func finishOnSignal() (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			fmt.Fprintf(os.Stderr, "e2e: %v: tearing down before exiting\n", s)
			if err := theSuite.finish(); err != nil {
				fmt.Fprintf(os.Stderr, "e2e: finish: %v\n", err)
			}
			os.Exit(1)
		case <-done:
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}

// suite is the shared environment: set up once, on first use, so that
// running only the unit tests (-run, -short) never touches Docker, and torn
// down by TestMain.
type suite struct {
	once  sync.Once
	skip  string // why the cluster tests skip; empty when env is usable
	err   error  // why setup failed
	env   *cluster
	steps []finishStep

	mu       sync.Mutex
	finished bool
	failures []string // what failed, repeated at the end (failed)
}

// failed notes a failure to repeat at the end of the run: CI keeps only
// the end of the output, where a subtest's message is long scrolled away.
func (s *suite) failed(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, what)
}

// finishStep undoes one setup step.
type finishStep struct {
	what string
	undo func(context.Context) error
}

// errSkip marks a setup failure that means "no cluster here" rather than
// "the cluster is broken".
type errSkip struct{ reason string }

func (e errSkip) Error() string { return e.reason }

// cluster returns the environment, skipping t when there is none and
// failing it when setting one up failed.
func (s *suite) cluster(t *testing.T) *cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("e2e: skipped in -short mode: needs a Kubernetes cluster and several minutes")
	}
	if !opts.enabled && opts.kubeconfig == "" {
		t.Skip("e2e: skipped: cluster tests run with `make e2e` (-e2e) or -kubeconfig FILE")
	}
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		env, err := setUp(ctx, s)
		var skip errSkip
		switch {
		case errors.As(err, &skip):
			s.skip = skip.reason
		case err != nil:
			s.err = err
		default:
			s.env = env
		}
	})
	if s.skip != "" {
		t.Skip(s.skip)
	}
	if s.err != nil {
		t.Fatalf("e2e setup: %v", s.err)
	}
	return s.env
}

// onFinish registers the undoing of a setup step; steps are undone in
// reverse order.
func (s *suite) onFinish(what string, undo func(context.Context) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.steps = append(s.steps, finishStep{what, undo})
}

// finish undoes every setup step once, unless -keep; it is safe to call
// from TestMain and from the signal handler.
func (s *suite) finish() error {
	s.mu.Lock()
	if s.finished {
		s.mu.Unlock()
		return nil
	}
	s.finished = true
	steps := s.steps
	s.mu.Unlock()
	if opts.keep {
		for i := len(steps) - 1; i >= 0; i-- {
			fmt.Fprintf(os.Stderr, "e2e: -keep: not undone: %s\n", steps[i].what)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var errs []error
	for i := len(steps) - 1; i >= 0; i-- {
		if err := steps[i].undo(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", steps[i].what, err))
		}
	}
	return errors.Join(errs...)
}

// repoRoot is the module root: go test runs in the package directory,
// test/e2e.
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	root := filepath.Clean(filepath.Join(wd, "..", ".."))
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return "", fmt.Errorf("module root: no go.mod two levels above %s", wd)
	}
	return root, nil
}
