package broker

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/reflection"

	dripv1 "github.com/dripmesh/drip/api/proto/drip/v1"
	"github.com/dripmesh/drip/internal/authz"
	"github.com/dripmesh/drip/internal/peerauth"
	"github.com/dripmesh/drip/internal/transport"
)

// TLSFiles locate PEM files for TLS. Empty CertFile means plaintext.
type TLSFiles struct {
	CertFile, KeyFile string
	// CAFile verifies the other side: clients' certificates when
	// RequireClientCert is set (mTLS), peers' certificates when dialling.
	CAFile            string
	RequireClientCert bool
	// VerifyClientCertIfGiven, on a listener that does not require client
	// certificates, verifies against CAFile those that clients present and
	// admits clients without one: certificate and token clients of an
	// authorization policy on one port.
	VerifyClientCertIfGiven bool
}

// Enabled reports whether TLS is configured.
func (t TLSFiles) Enabled() bool { return t.CertFile != "" }

// ServerTLS builds the server side configuration.
func (t TLSFiles) ServerTLS() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("load TLS key pair %s, %s: %w", t.CertFile, t.KeyFile, err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if t.RequireClientCert || t.VerifyClientCertIfGiven {
		pool, err := loadPool(t.CAFile)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
		if !t.RequireClientCert {
			cfg.ClientAuth = tls.VerifyClientCertIfGiven
		}
	}
	return cfg, nil
}

// ClientTLS builds the dialling side configuration: it verifies the server
// against CAFile (or the system roots) and presents our certificate.
func (t TLSFiles) ClientTLS() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		pool, err := loadPool(t.CAFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("load TLS key pair %s, %s: %w", t.CertFile, t.KeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

func loadPool(file string) (*x509.CertPool, error) {
	if file == "" {
		return nil, errors.New("TLS: a CA file is required to verify the other side")
	}
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA file %s holds no PEM certificate", file)
	}
	return pool, nil
}

// ReadinessService is the gRPC health service name that turns SERVING once
// the broker has joined the mesh (Broker.Joined); the empty name is
// SERVING while the server runs. Both turn NOT_SERVING when it drains.
const ReadinessService = "drip.v1.Broker"

// requireBrokerCertificate refuses, on the peer listener, a certificate
// that is not a broker's. Brokers serve as well as dial, so their
// certificates allow serverAuth; one issued for clients only (clientAuth)
// must not open a peer link and speak for a router. Separate issuers for
// clients and brokers (--tls-client-ca) keep the roles apart more firmly.
func requireBrokerCertificate(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("peer presented no certificate")
	}
	leaf := cs.PeerCertificates[0]
	for _, u := range leaf.ExtKeyUsage {
		if u == x509.ExtKeyUsageServerAuth || u == x509.ExtKeyUsageAny {
			return nil
		}
	}
	return fmt.Errorf("certificate %q is not a broker's: it does not allow serverAuth (a client certificate cannot open a peer link)", leaf.Subject.CommonName)
}

// The states of Server.readiness.
const (
	readyJoining int32 = iota
	readyServing
	readyDraining
)

// ServerConfig says where a broker listens.
type ServerConfig struct {
	ClientAddr  string // drip.v1.Broker, health, reflection
	PeerAddr    string // drip.v1.Peer, health (no reflection: peers need not browse)
	MetricsAddr string // HTTP /metrics; empty disables it
	// Pprof serves Go's profiler (net/http/pprof) under /debug/pprof/ on
	// the metrics listener. Off by default: profiles reveal internals and
	// cost CPU while they run.
	Pprof bool
	// MetricsTLS serves the metrics listener (/metrics, /healthz and
	// pprof) over HTTPS with its certificate; with RequireClientCert only
	// clients whose certificate CAFile verifies (Prometheus with a scrape
	// certificate) get a response. Empty, the listener is plain HTTP: for
	// loopback and trusted networks only, since /metrics names subscribers
	// and links and pprof reveals internals.
	MetricsTLS TLSFiles
	// AuthzPolicy, if set, authorizes every client stream (internal/authz;
	// Broker.SetAuthzPolicy replaces it while the server runs).
	AuthzPolicy *authz.Policy
	ClientTLS   TLSFiles
	PeerTLS     TLSFiles // also used when dialling peers (mTLS)
	// PeerIdentity requires each peer's certificate to name the router it
	// claims: a URI SAN drip://<mesh>/router/<id> or a DNS SAN
	// <id>.router.<mesh>.drip.internal (PeerTLS must require client
	// certificates). Without it any broker certificate may claim
	// any router ID.
	PeerIdentity bool
	// PeerResolver, if set, resolves the host names of neighbours'
	// addresses instead of DNS (in Kubernetes: the headless Service's
	// EndpointSlices, see internal/kube).
	PeerResolver Resolver
	// StopTimeout bounds how long open client streams may take to finish
	// after the broker has drained, before they are cut.
	StopTimeout time.Duration
	// ClientListener, PeerListener and MetricsListener, when set, are
	// used instead of binding ClientAddr, PeerAddr and MetricsAddr (tests
	// bind every broker's listeners before configuring peers; the lab
	// binds them in a site's network namespace).
	ClientListener, PeerListener, MetricsListener net.Listener
}

// Server runs a Broker behind real listeners.
type Server struct {
	b                  *Broker
	cfg                ServerConfig
	log                *zap.Logger
	clientLis, peerLis net.Listener
	metricsLis         net.Listener
	clientSrv, peerSrv *grpc.Server
	httpSrv            *http.Server
	health             *health.Server
	// readiness is what /readyz says: readyJoining, readyServing (the
	// broker joined), readyDraining (for good).
	readiness atomic.Int32
	reg       *prometheus.Registry
}

// NewServer validates sc, binds the listeners (so ":0" addresses are known
// before serving) and builds the broker with a fresh metrics registry that
// /metrics serves.
func NewServer(cfg Config, sc ServerConfig, opts ...Option) (*Server, error) {
	reg := prometheus.NewRegistry()
	s := &Server{cfg: sc, health: health.NewServer(), reg: reg}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	peerDial := transport.GRPCDialer{NotSentLowat: cfg.PeerNotSentLowat}
	peerCreds, clientCreds, err := sc.credentials()
	if err != nil {
		return nil, err
	}
	if sc.PeerIdentity && !sc.PeerTLS.RequireClientCert {
		return nil, errors.New("peer identity needs mutual TLS on the peer port (a CA that verifies peers' certificates)")
	}
	if peerCreds != nil {
		cliTLS, err := sc.PeerTLS.ClientTLS()
		if err != nil {
			return nil, fmt.Errorf("peer TLS: %w", err)
		}
		peerDial.Creds = credentials.NewTLS(cliTLS)
	}
	var dialer transport.Dialer = peerDial
	if sc.PeerResolver != nil {
		dialer = resolvingDialer{grpc: peerDial, resolver: sc.PeerResolver}
	}
	opts = append([]Option{WithRegisterer(reg), WithDialer(dialer)}, opts...)
	if sc.PeerIdentity {
		// One knob: per-router certificates name the router for the
		// handshake and sign its advertisements.
		auth, err := sc.advertisementAuth(cfg)
		if err != nil {
			return nil, err
		}
		opts = append(opts, WithAuthenticator(auth))
	}
	b, err := New(cfg, opts...)
	if err != nil {
		return nil, err
	}
	s.b, s.log = b, b.log
	if sc.AuthzPolicy != nil {
		if err := b.SetAuthzPolicy(sc.AuthzPolicy); err != nil {
			return nil, err
		}
	}
	var metricsTLS *tls.Config
	if sc.MetricsTLS.Enabled() {
		if metricsTLS, err = sc.MetricsTLS.ServerTLS(); err != nil {
			return nil, fmt.Errorf("metrics TLS: %w", err)
		}
	} else if sc.MetricsTLS.RequireClientCert {
		return nil, errors.New("metrics TLS: requiring client certificates needs a certificate and key to serve HTTPS with")
	}
	if peerCreds != nil {
		peerCreds = &countedCreds{TransportCredentials: peerCreds, failed: b.m.linkHandshakeFails.WithLabelValues("tls"),
			log: s.log, logEvery: &rate.Sometimes{First: 3, Interval: 10 * time.Second}}
	}

	// Keepalives detect a dead neighbour or client whose TCP connection
	// lingers (a pod that vanished); the link-state dead interval catches
	// silent peers anyway.
	ka := []grpc.ServerOption{
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	}
	// The client API sends deliveries and receives publish requests in
	// their wire form (rawcodec.Raw): encoded once, decoded without building
	// protobuf objects; its streams have a fixed window (ClientServerOptions).
	s.clientSrv = grpc.NewServer(append(append(ka, append(ClientServerOptions(), grpc.MaxRecvMsgSize(ReceiveLimit(cfg)))...), creds(clientCreds)...)...)
	dripv1.RegisterBrokerServer(s.clientSrv, b.ClientService())
	healthpb.RegisterHealthServer(s.clientSrv, s.health)
	reflection.Register(s.clientSrv)
	s.peerSrv = grpc.NewServer(append(append(ka, transport.PeerServerOptions()...), creds(peerCreds)...)...)
	ps := b.PeerService()
	if sc.PeerIdentity {
		ps.Authorize = peerIdentity(cfg.Mesh)
	}
	dripv1.RegisterPeerServer(s.peerSrv, ps)
	healthpb.RegisterHealthServer(s.peerSrv, s.health)
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	s.health.SetServingStatus(ReadinessService, healthpb.HealthCheckResponse_NOT_SERVING)

	if s.clientLis = sc.ClientListener; s.clientLis == nil {
		if s.clientLis, err = net.Listen("tcp", sc.ClientAddr); err != nil {
			return nil, fmt.Errorf("client listener: %w", err)
		}
	}
	if s.peerLis = sc.PeerListener; s.peerLis == nil {
		if s.peerLis, err = net.Listen("tcp", sc.PeerAddr); err != nil {
			s.clientLis.Close()
			return nil, fmt.Errorf("peer listener: %w", err)
		}
	}
	// A peer connection's backlog waits in the link queue, not in the
	// kernel (Config.PeerNotSentLowat); New validated the bound.
	unbounded := &rate.Sometimes{First: 3, Interval: time.Minute}
	bounded, err := transport.BoundUnsent(s.peerLis, cfg.PeerNotSentLowat, func(err error) {
		unbounded.Do(func() { s.log.Warn("peer connection accepted without its unsent bound", zap.Error(err)) })
	})
	if err != nil {
		s.clientLis.Close()
		s.peerLis.Close()
		return nil, fmt.Errorf("peer listener: %w", err)
	}
	s.peerLis = bounded
	if cfg.PeerNotSentLowat > 0 && !transport.NotSentLowatSupported {
		s.log.Warn("TCP_NOTSENT_LOWAT is not available on this platform: peer connections keep the kernel's send buffer", zap.Int("peer_notsent_lowat", cfg.PeerNotSentLowat))
	}
	// What the client connections hold for Subscribe streams counts
	// against the memory budget.
	s.clientLis = b.sends.listener(s.clientLis)
	if s.metricsLis = sc.MetricsListener; s.metricsLis == nil && sc.MetricsAddr != "" {
		if s.metricsLis, err = net.Listen("tcp", sc.MetricsAddr); err != nil {
			s.clientLis.Close()
			s.peerLis.Close()
			return nil, fmt.Errorf("metrics listener: %w", err)
		}
	}
	if s.metricsLis != nil {
		if metricsTLS != nil {
			s.metricsLis = tls.NewListener(s.metricsLis, metricsTLS)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
		// /readyz is the readiness of the gRPC health service
		// ReadinessService, for probes that cannot speak gRPC over TLS
		// (kubelet's): a TLS broker otherwise could only offer a TCP
		// connect, which is ready long before the broker has joined.
		mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
			if s.readiness.Load() != readyServing {
				http.Error(w, "not ready: joining the mesh or draining", http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte("ok\n"))
		})
		if sc.Pprof {
			mux.HandleFunc("/debug/pprof/", pprof.Index)
			mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
			mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
			mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
			mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		}
		// A refused client certificate is the client's problem, not the
		// broker's: net/http logs each handshake it refuses, which a
		// scanner would turn into a flood, so its log goes to debug.
		errLog, err := zap.NewStdLogAt(s.log.Named("metrics"), zap.DebugLevel)
		if err != nil {
			return nil, err
		}
		s.httpSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: errLog}
	}
	return s, nil
}

// PeerIdentityURI is the URI SAN that names router id of mesh in a
// broker's certificate (ServerConfig.PeerIdentity).
func PeerIdentityURI(mesh string, id uint32) string { return peerauth.IdentityURI(mesh, id) }

// advertisementAuth signs the broker's advertisements with the key of its
// peer certificate and verifies others' against the peer CA (peerauth).
func (sc ServerConfig) advertisementAuth(cfg Config) (*peerauth.Authenticator, error) {
	cert, err := tls.LoadX509KeyPair(sc.PeerTLS.CertFile, sc.PeerTLS.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("peer identity: load TLS key pair %s, %s: %w", sc.PeerTLS.CertFile, sc.PeerTLS.KeyFile, err)
	}
	roots, err := loadPool(sc.PeerTLS.CAFile)
	if err != nil {
		return nil, fmt.Errorf("peer identity: %w", err)
	}
	a, err := peerauth.New(peerauth.Config{Mesh: cfg.Mesh, Router: cfg.ID, Certificate: cert, Roots: roots})
	if err != nil {
		return nil, fmt.Errorf("peer identity: %w", err)
	}
	return a, nil
}

// peerIdentity admits a peer only if its certificate names the router ID
// and mesh its Open claims, so that a broker holding a valid certificate
// cannot speak for another router.
func peerIdentity(mesh string) func(context.Context, *dripv1.Open) error {
	return func(ctx context.Context, remote *dripv1.Open) error {
		want := PeerIdentityURI(mesh, remote.GetRouterId())
		p, _ := peer.FromContext(ctx)
		var info credentials.TLSInfo
		if p != nil {
			info, _ = p.AuthInfo.(credentials.TLSInfo)
		}
		if len(info.State.PeerCertificates) == 0 {
			return &transport.IncompatibleError{Reason: "identity", Detail: "no peer certificate to check " + want + " against"}
		}
		leaf := info.State.PeerCertificates[0]
		if peerauth.NamesRouter(leaf, mesh, remote.GetRouterId()) {
			return nil
		}
		return &transport.IncompatibleError{Reason: "identity",
			Detail: fmt.Sprintf("certificate %q does not name router %d (%s)",
				leaf.Subject.CommonName, remote.GetRouterId(), peerauth.Identity(mesh, remote.GetRouterId()))}
	}
}

// countedCreds counts the TLS handshakes the peer listener refuses — a
// certificate from another CA, none, a client's, plaintext — and logs the
// first few of every ten seconds, so a scanner cannot flood the log.
type countedCreds struct {
	credentials.TransportCredentials
	failed   prometheus.Counter
	log      *zap.Logger
	logEvery *rate.Sometimes
}

func (c *countedCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	out, info, err := c.TransportCredentials.ServerHandshake(conn)
	if err != nil {
		c.failed.Inc()
		c.logEvery.Do(func() {
			c.log.Warn("refused TLS handshake on the peer port", zap.Stringer("remote", conn.RemoteAddr()), zap.Error(err))
		})
	}
	return out, info, err
}

func (c *countedCreds) Clone() credentials.TransportCredentials {
	return &countedCreds{TransportCredentials: c.TransportCredentials.Clone(), failed: c.failed, log: c.log, logEvery: c.logEvery}
}

func creds(c credentials.TransportCredentials) []grpc.ServerOption {
	if c == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.Creds(c)}
}

func (sc ServerConfig) credentials() (peer, client credentials.TransportCredentials, err error) {
	if sc.PeerTLS.Enabled() {
		cfg, err := sc.PeerTLS.ServerTLS()
		if err != nil {
			return nil, nil, fmt.Errorf("peer TLS: %w", err)
		}
		if sc.PeerTLS.RequireClientCert {
			cfg.VerifyConnection = requireBrokerCertificate
		}
		peer = credentials.NewTLS(cfg)
	}
	if sc.ClientTLS.Enabled() {
		cfg, err := sc.ClientTLS.ServerTLS()
		if err != nil {
			return nil, nil, fmt.Errorf("client TLS: %w", err)
		}
		client = credentials.NewTLS(cfg)
	}
	return peer, client, nil
}

// Registry is the registry /metrics serves.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// Broker returns the served broker.
func (s *Server) Broker() *Broker { return s.b }

// ClientAddr, PeerAddr and MetricsAddr are the bound addresses.
func (s *Server) ClientAddr() string { return s.clientLis.Addr().String() }

// PeerAddr is the bound peer address.
func (s *Server) PeerAddr() string { return s.peerLis.Addr().String() }

// MetricsAddr is the bound metrics address, or "" when disabled.
func (s *Server) MetricsAddr() string {
	if s.metricsLis == nil {
		return ""
	}
	return s.metricsLis.Addr().String()
}

// Serve runs until ctx ends, then shuts down in order: health turns
// NOT_SERVING (Kubernetes stops routing clients here), the broker withdraws
// from the mesh and drains, open streams get StopTimeout to finish, and
// the listeners close.
func (s *Server) Serve(ctx context.Context) error {
	errc := make(chan error, 3)
	go func() { errc <- s.clientSrv.Serve(s.clientLis) }()
	go func() { errc <- s.peerSrv.Serve(s.peerLis) }()
	if s.httpSrv != nil {
		go func() {
			if err := s.httpSrv.Serve(s.metricsLis); !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	runDone := make(chan error, 1)
	go func() { runDone <- s.b.Run(runCtx) }()
	s.log.Info("serving", zap.String("client", s.ClientAddr()), zap.String("peer", s.PeerAddr()), zap.String("metrics", s.MetricsAddr()))
	// The server as a whole is healthy while it runs (liveness); the
	// broker service is ready once the broker has routes (readiness): a
	// rolling update that went on to the next broker before this one had
	// joined would leave two gaps in the mesh at once (design §10).
	// Health.Shutdown turns both NOT_SERVING when the drain begins.
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	go func() {
		select {
		case <-s.b.Joined():
			if s.readiness.CompareAndSwap(readyJoining, readyServing) {
				s.health.SetServingStatus(ReadinessService, healthpb.HealthCheckResponse_SERVING)
			}
		case <-runCtx.Done():
		}
	}()

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
		s.log.Error("listener failed", zap.Error(serveErr))
	}
	s.readiness.Store(readyDraining)
	s.health.Shutdown()
	stop()
	<-runDone

	stopTimeout := s.cfg.StopTimeout
	if stopTimeout <= 0 {
		stopTimeout = 5 * time.Second
	}
	graceful := func(g *grpc.Server) {
		done := make(chan struct{})
		go func() { g.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-s.b.clock.After(stopTimeout):
			g.Stop()
		}
	}
	graceful(s.clientSrv)
	graceful(s.peerSrv)
	if s.httpSrv != nil {
		sctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		_ = s.httpSrv.Shutdown(sctx)
		cancel()
	}
	return serveErr
}
