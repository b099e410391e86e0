package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/dripmesh/drip/client"
)

// connFlags are the flags every client command has for reaching a broker.
type connFlags struct {
	timeout       time.Duration
	failoverWait  time.Duration
	name          string
	tls           bool
	tlsCA         string
	tlsServerName string
	// tlsCert and tlsKey are the client certificate brokers that require
	// one (--tls-client-auth) verify, and authorization policies name.
	tlsCert, tlsKey string
	congestion      bool
	ccFeedback      bool
	// token is --token, else $DRIP_TOKEN; tokenPlaintext lets it travel
	// without TLS (loopback tests).
	token          string
	tokenPlaintext bool
	getenv         func(string) string // os.Getenv; tests replace it
}

// tokenEnv is the environment variable a client command reads its bearer
// token from when --token is not given: a flag shows in ps and shell
// history, the environment does not.
const tokenEnv = "DRIP_TOKEN"

func (f *connFlags) register(cmd *cobra.Command, defaultName string) {
	f.getenv = os.Getenv
	fl := cmd.Flags()
	fl.DurationVar(&f.timeout, "connect-timeout", 10*time.Second, "how long to wait for the broker connection")
	if cmd.Flags().Lookup("failover-wait") == nil {
		fl.DurationVar(&f.failoverWait, "failover-wait", 0, "after the broker fails, how long to keep trying the others before giving up (0: until interrupted)")
	}
	fl.StringVar(&f.name, "name", defaultName, "client name shown in the brokers' logs and metrics")
	fl.BoolVar(&f.tls, "tls", false, "connect over TLS, verifying the broker against the system roots")
	fl.StringVar(&f.tlsCA, "tls-ca", "", "connect over TLS, verifying the broker against the PEM certificates in this `file`")
	fl.StringVar(&f.tlsServerName, "tls-server-name", "", "name to verify the broker's certificate against (default: the host of the address)")
	_ = cmd.MarkFlagFilename("tls-ca", "pem", "crt")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "PEM client certificate `file`, for brokers that require client certificates or authorize by them (implies TLS)")
	fl.StringVar(&f.tlsKey, "tls-key", "", "PEM key `file` of --tls-cert")
	_ = cmd.MarkFlagFilename("tls-cert", "pem", "crt")
	_ = cmd.MarkFlagFilename("tls-key", "pem", "key")
	fl.BoolVar(&f.congestion, "congestion", true, "publishers slow the flows that subscriptions ask them to (content-aware congestion control, docs/design.md §12)")
	fl.BoolVar(&f.ccFeedback, "congestion-feedback", false, "subscriptions measure loss and ask publishers to slow the flows that lose messages on their way")
	fl.StringVar(&f.token, "token", "", "bearer token for brokers with an authorization policy (default $"+tokenEnv+", which keeps it out of ps and shell history); needs --tls or --tls-ca")
	fl.BoolVar(&f.tokenPlaintext, "token-plaintext", false, "send the token without TLS: only to a broker on the loopback interface, anyone on the path can read it")
}

// options turns the flags into client options.
func (f *connFlags) options() ([]client.Option, error) {
	opts := []client.Option{client.WithName(f.name), client.WithCongestionControl(f.congestion), client.WithCongestionFeedback(f.ccFeedback)}
	if f.failoverWait > 0 {
		opts = append(opts, client.WithFailoverWait(f.failoverWait))
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return nil, fmt.Errorf("--tls-cert and --tls-key go together")
	}
	plaintext := !f.tls && f.tlsCA == "" && f.tlsServerName == "" && f.tlsCert == ""
	token := f.token
	if token == "" && f.getenv != nil {
		token = f.getenv(tokenEnv)
	}
	if token != "" {
		if plaintext && !f.tokenPlaintext {
			return nil, fmt.Errorf("a token (--token or $%s) needs --tls or --tls-ca: over plaintext anyone on the path can read it (--token-plaintext for a broker on loopback)", tokenEnv)
		}
		opts = append(opts, client.WithToken(token))
		if f.tokenPlaintext {
			opts = append(opts, client.WithTokenOverPlaintext())
		}
	}
	if plaintext {
		return opts, nil
	}
	cfg := &tls.Config{ServerName: f.tlsServerName, MinVersion: tls.VersionTLS12}
	if f.tlsCA != "" {
		pem, err := os.ReadFile(f.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca %s: no PEM certificate found", f.tlsCA)
		}
	}
	if f.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return append(opts, client.WithTLS(cfg)), nil
}

// dial connects to addr within the connect timeout.
func (f *connFlags) dial(ctx context.Context, addr string, extra ...client.Option) (*client.Client, error) {
	if addr == "" {
		return nil, fmt.Errorf("--broker is required: the address (host:port) of a broker of the mesh, or several, comma-separated")
	}
	opts, err := f.options()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	return client.Dial(ctx, addr, append(opts, extra...)...)
}

// brokerFlagHelp is the --broker help of the client commands.
const brokerFlagHelp = "broker address host:port; several, comma-separated, to fail over in that order; or dns:///name:port for every address of a name"

// signalContext is cancelled on SIGINT or SIGTERM, which ends a command
// cleanly. The first signal also restores the default handling, so a
// second one kills a command that does not stop.
func signalContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	return ctx, stop
}

// rateValue is a messages-per-second flag: "100", "100/s" or "2.5/s".
type rateValue float64

func (r *rateValue) String() string {
	return strconv.FormatFloat(float64(*r), 'g', -1, 64) + "/s"
}

func (r *rateValue) Set(s string) error {
	f, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), "/s"), 64)
	if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("want messages per second, like 100 or 2.5/s")
	}
	*r = rateValue(f)
	return nil
}

func (r *rateValue) Type() string { return "rate" }

// fixedCompletions completes a flag from a fixed list.
func fixedCompletions(values ...string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return values, cobra.ShellCompDirectiveNoFileComp
	}
}
