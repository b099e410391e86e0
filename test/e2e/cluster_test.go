package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"go/build"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	kindcluster "sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"
	kindlog "sigs.k8s.io/kind/pkg/log"
)

// cluster is a Kubernetes cluster with the image under test on its nodes.
type cluster struct {
	kubeconfig string
	client     kubernetes.Interface
	// streams is client without its request timeout, for the brokers'
	// logs followed through a rolling restart (its context bounds it):
	// with client's minute every follow ended a minute in.
	streams    kubernetes.Interface
	helmBin    string // the helm binary
	root       string // the module root
	image      imageRef
	pullPolicy corev1.PullPolicy
}

// setUp is the suite's Setup: find the tools, build the image, create or
// reach the cluster and put the image on its nodes. What it creates it
// registers with s for Finish. An errSkip means there is no cluster here.
func setUp(ctx context.Context, s *suite) (*cluster, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	mode := opts.loadMode()
	if opts.kubeconfig == "" {
		if err := dockerInfo(ctx); err != nil {
			return nil, errSkip{fmt.Sprintf("e2e: skipped: no -kubeconfig, and kind cannot create a cluster without a Docker engine: %v", err)}
		}
	}
	c := &cluster{kubeconfig: opts.kubeconfig}
	var err error
	if c.root, err = repoRoot(); err != nil {
		return nil, err
	}
	if c.helmBin, err = findHelm(); err != nil {
		return nil, err
	}
	c.image, _ = parseImageRef(opts.image) // validated
	c.pullPolicy = corev1.PullNever
	if mode == loadNone {
		c.pullPolicy = corev1.PullIfNotPresent
	}

	// Build first: a broken Dockerfile should fail before minutes of
	// cluster creation.
	if mode == loadKind {
		if err := dockerInfo(ctx); err != nil {
			return nil, fmt.Errorf("-load kind needs a Docker engine: %v", err)
		}
		if opts.build {
			if err := dockerBuild(ctx, c.root, opts.image); err != nil {
				return nil, err
			}
		}
	}

	kindName := opts.kindName
	if c.kubeconfig == "" {
		if kindName == "" {
			kindName = "drip-e2e-" + randomSuffix()
		}
		if c.kubeconfig, err = createKind(s, kindName); err != nil {
			return nil, err
		}
	} else if mode == loadKind && kindName == "" {
		if kindName, err = kindNameOf(c.kubeconfig); err != nil {
			return nil, err
		}
	}

	switch mode {
	case loadKind:
		if err := kindLoad(ctx, kindName, opts.image); err != nil {
			return nil, err
		}
	case loadCtr:
		archive := opts.imageArchive
		if archive == "" {
			archive = filepath.Join(os.TempDir(), "drip-e2e-image-"+randomSuffix()+".tar")
			s.onFinish("image archive "+archive, func(context.Context) error { return os.Remove(archive) })
			req := archiveRequest{Root: c.root, Image: opts.image, Build: opts.build, Path: archive}
			if err := imageArchiver(ctx, req); err != nil {
				return nil, fmt.Errorf("image archive for -load ctr: %w", err)
			}
		}
		if err := ctrImport(ctx, archive); err != nil {
			return nil, err
		}
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", c.kubeconfig, err)
	}
	// Every request the suite makes is small; a black-holed API server
	// should fail the run, not hang it until go test's timeout.
	cfg.Timeout = time.Minute
	// client-go's default of 5 requests a second would throttle the
	// suite's own scrapes: measuring convergence and recording the
	// brokers' counters through a rolling restart read every broker
	// several times a second.
	cfg.QPS, cfg.Burst = 50, 100
	if c.client, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", c.kubeconfig, err)
	}
	streamCfg := rest.CopyConfig(cfg)
	streamCfg.Timeout = 0
	if c.streams, err = kubernetes.NewForConfig(streamCfg); err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", c.kubeconfig, err)
	}
	v, err := c.client.Discovery().ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("the API server of kubeconfig %s does not answer: %w", c.kubeconfig, err)
	}
	fmt.Fprintf(os.Stderr, "e2e: cluster %s (Kubernetes %s), image %s, load %s\n", cfg.Host, v.GitVersion, c.image, mode)
	return c, nil
}

// archiveRequest asks for an image archive that `ctr images import` reads:
// a docker-save or OCI layout tarball whose image carries the name Image.
type archiveRequest struct {
	Root  string // module root, the build context
	Image string // reference the archived image must carry, e.g. drip:dev
	Build bool   // -build: (re)build the image rather than archive an existing one
	Path  string // where to write the archive
}

// imageArchiver produces the archive -load ctr imports when -image-archive
// is not given. The default builds and saves with Docker. A machine without
// Docker assigns its own from an init function of another file of this
// package, one that packs the image in Go.
var imageArchiver = dockerArchive

func dockerArchive(ctx context.Context, req archiveRequest) error {
	if err := dockerInfo(ctx); err != nil {
		return fmt.Errorf("the default image archiver uses Docker: %v; give -image-archive instead", err)
	}
	if req.Build {
		if err := dockerBuild(ctx, req.Root, req.Image); err != nil {
			return err
		}
	}
	_, err := run(ctx, "", "docker", "save", "--output", req.Path, req.Image)
	return err
}

// run runs a command and returns its standard output; the error carries
// the end of its standard error.
func run(ctx context.Context, dir, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(tail(stderr.Bytes(), 2000))
		if msg == "" {
			msg = strings.TrimSpace(tail(out, 2000))
		}
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, msg)
	}
	return out, nil
}

// dockerInfo checks that a Docker engine answers; the error is the first
// line of what docker said.
func dockerInfo(ctx context.Context) error {
	if _, err := exec.LookPath("docker"); err != nil {
		return errors.New("docker is not on PATH")
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput()
	if err != nil {
		return fmt.Errorf("`docker info` failed: %s", firstLine(out, err))
	}
	return nil
}

// firstLine is the first non-blank line of out, or err's text.
func firstLine(out []byte, err error) string {
	for line := range strings.SplitSeq(string(out), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			return line
		}
	}
	return err.Error()
}

// dockerBuild builds the image as `make image` does, stamped with the
// image's tag as its version.
func dockerBuild(ctx context.Context, root, image string) error {
	ref, err := parseImageRef(image)
	if err != nil {
		return err
	}
	start := time.Now()
	args := []string{"build", "--file", filepath.Join(root, "deploy", "Dockerfile"), "--build-arg", "VERSION=" + ref.Tag, "--tag", image, root}
	fmt.Fprintf(os.Stderr, "e2e: docker %s\n", strings.Join(args, " "))
	if _, err := run(ctx, root, "docker", args...); err != nil {
		return fmt.Errorf("building the image: %w", err)
	}
	fmt.Fprintf(os.Stderr, "e2e: built %s in %v\n", image, time.Since(start).Round(time.Second))
	return nil
}

// findHelm looks for helm on PATH, then where `go install` puts it.
func findHelm() (string, error) {
	if p, err := exec.LookPath("helm"); err == nil {
		return p, nil
	}
	p := filepath.Join(build.Default.GOPATH, "bin", "helm")
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("helm is neither on PATH nor in %s (see test/e2e/README.md)", filepath.Dir(p))
}

func randomSuffix() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func kindProvider() *kindcluster.Provider {
	return kindcluster.NewProvider(kindcluster.ProviderWithDocker(), kindcluster.ProviderWithLogger(kindLogger{}))
}

// createKind creates a kind cluster and registers its deletion; it returns
// the path of the cluster's own kubeconfig (the user's is left alone).
func createKind(s *suite, name string) (string, error) {
	p := kindProvider()
	kubeconfig := filepath.Join(os.TempDir(), name+".kubeconfig")
	// Registered first: a failed create can leave node containers behind.
	s.onFinish("kind cluster "+name+" (kubeconfig "+kubeconfig+")", func(context.Context) error {
		err := p.Delete(name, kubeconfig)
		_ = os.Remove(kubeconfig)
		return err
	})
	options := []kindcluster.CreateOption{
		kindcluster.CreateWithKubeconfigPath(kubeconfig),
		kindcluster.CreateWithWaitForReady(3 * time.Minute),
		kindcluster.CreateWithDisplayUsage(false),
		kindcluster.CreateWithDisplaySalutation(false),
	}
	if opts.kindImage != "" {
		options = append(options, kindcluster.CreateWithNodeImage(opts.kindImage))
	}
	start := time.Now()
	fmt.Fprintf(os.Stderr, "e2e: creating kind cluster %s\n", name)
	if err := p.Create(name, options...); err != nil {
		return "", fmt.Errorf("creating kind cluster %s: %w", name, err)
	}
	fmt.Fprintf(os.Stderr, "e2e: kind cluster %s ready in %v\n", name, time.Since(start).Round(time.Second))
	return kubeconfig, nil
}

// kindNameOf is the kind cluster a kubeconfig's current context belongs to.
func kindNameOf(kubeconfig string) (string, error) {
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		return "", fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	return kindNameFromContext(cfg.CurrentContext)
}

// kindNameFromContext undoes kind's context naming, kind-<cluster>.
func kindNameFromContext(context string) (string, error) {
	name, ok := strings.CutPrefix(context, "kind-")
	if !ok || name == "" {
		return "", fmt.Errorf("-load kind: context %q is not a kind cluster's (kind-NAME); give -kind-name or another -load", context)
	}
	return name, nil
}

// kindLoad does what `kind load docker-image` does: save the image from
// Docker and import it into every node's containerd.
func kindLoad(ctx context.Context, name, image string) error {
	nodes, err := kindProvider().ListInternalNodes(name)
	if err != nil {
		return fmt.Errorf("kind cluster %s: %w", name, err)
	}
	if len(nodes) == 0 {
		return fmt.Errorf("kind cluster %s has no nodes (`kind get clusters` lists the clusters)", name)
	}
	dir, err := os.MkdirTemp("", "drip-e2e-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	archive := filepath.Join(dir, "image.tar")
	if _, err := run(ctx, "", "docker", "save", "--output", archive, image); err != nil {
		return err
	}
	for _, n := range nodes {
		f, err := os.Open(archive)
		if err != nil {
			return err
		}
		err = nodeutils.LoadImageArchive(n, f)
		f.Close()
		if err != nil {
			return fmt.Errorf("loading %s into kind node %s: %w", image, n.String(), err)
		}
	}
	fmt.Fprintf(os.Stderr, "e2e: loaded %s into %d node(s) of kind cluster %s\n", image, len(nodes), name)
	return nil
}

// ctrImport imports an image archive into this machine's containerd, in
// the namespace the kubelet's CRI uses ($CONTAINERD_ADDRESS selects the
// socket, as for ctr itself).
func ctrImport(ctx context.Context, archive string) error {
	if _, err := exec.LookPath("ctr"); err != nil {
		return errors.New("-load ctr: ctr is not on PATH")
	}
	if _, err := run(ctx, "", "ctr", "--namespace", "k8s.io", "images", "import", "--digests", archive); err != nil {
		return fmt.Errorf("-load ctr: %w", err)
	}
	fmt.Fprintf(os.Stderr, "e2e: imported %s into containerd (namespace k8s.io)\n", archive)
	return nil
}

// kindLogger passes kind's user-facing messages to standard error: the
// tests have no *testing.T while the cluster is created.
type kindLogger struct{}

func (kindLogger) Warn(msg string) { fmt.Fprintln(os.Stderr, "kind: "+msg) }
func (kindLogger) Warnf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "kind: "+format+"\n", args...)
}
func (kindLogger) Error(msg string) { fmt.Fprintln(os.Stderr, "kind: "+msg) }
func (kindLogger) Errorf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "kind: "+format+"\n", args...)
}
func (kindLogger) V(level kindlog.Level) kindlog.InfoLogger { return kindInfo(level == 0) }

type kindInfo bool

func (i kindInfo) Info(msg string) {
	if i {
		fmt.Fprintln(os.Stderr, "kind: "+msg)
	}
}

func (i kindInfo) Infof(format string, args ...any) {
	if i {
		fmt.Fprintf(os.Stderr, "kind: "+format+"\n", args...)
	}
}

func (i kindInfo) Enabled() bool { return bool(i) }

func TestKindNameFromContext(t *testing.T) {
	name, err := kindNameFromContext("kind-drip-e2e-abc123")
	require.NoError(t, err)
	assert.Equal(t, "drip-e2e-abc123", name)
	for _, bad := range []string{"", "kind-", "kubernetes-admin@kubernetes", "minikube"} {
		_, err := kindNameFromContext(bad)
		assert.ErrorContains(t, err, "not a kind cluster's", bad)
	}
}

func TestKindNameOfReadsTheCurrentContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters: [{name: kind-x, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: kind-x, user: {}}]
contexts:
- {name: kind-x, context: {cluster: kind-x, user: kind-x}}
- {name: other, context: {cluster: kind-x, user: kind-x}}
current-context: kind-x
`), 0o600))
	name, err := kindNameOf(path)
	require.NoError(t, err)
	assert.Equal(t, "x", name)
	_, err = kindNameOf(filepath.Join(t.TempDir(), "missing"))
	assert.Error(t, err)
}

func TestFirstLine(t *testing.T) {
	assert.Equal(t, "Cannot connect to the Docker daemon", firstLine([]byte("\n  \nCannot connect to the Docker daemon\nmore\n"), errors.New("exit 1")))
	assert.Equal(t, "exit status 1", firstLine(nil, errors.New("exit status 1")))
}

func TestOptionsValidate(t *testing.T) {
	base := options{image: "drip:dev", load: loadAuto, scenario: scenarioMesh, mesh: defaultMesh(), bench: defaultBench(), multiSite: defaultMultiSite(), ramp: defaultRamp(), restart: defaultRestart()}
	require.NoError(t, base.validate())
	assert.Equal(t, loadKind, base.loadMode(), "a created cluster needs the image loaded")
	withKC := base
	withKC.kubeconfig = "/etc/kubernetes/admin.conf"
	assert.Equal(t, loadNone, withKC.loadMode(), "an existing cluster is assumed to have or pull the image")

	bad := map[string]func(*options){
		"unknown load":             func(o *options) { o.load = "scp" },
		"ctr without kubeconfig":   func(o *options) { o.load = loadCtr },
		"none with a kind cluster": func(o *options) { o.load = loadNone },
		"digest image":             func(o *options) { o.image = "drip@sha256:00" },
		"bad mesh":                 func(o *options) { o.mesh.Brokers = 0 },
		"bad bench":                func(o *options) { o.bench.Rate = -1 },
		"bad ramp":                 func(o *options) { o.ramp.Factor = 0.5 },
		"bad restart":              func(o *options) { o.restart.Duration = 0 },
		"unknown scenario":         func(o *options) { o.scenario = "everything" },
		"one site":                 func(o *options) { o.multiSite.Sites = 1 },
		"too many site brokers":    func(o *options) { o.multiSite.Brokers = siteRouterIDs + 1 },
	}
	for name, mutate := range bad {
		o := base
		mutate(&o)
		assert.Error(t, o.validate(), name)
	}
}
