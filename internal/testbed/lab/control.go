package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

// Status is a snapshot of a running lab, as the control API returns it.
type Status struct {
	Name   string `json:"name"`
	Prefix string `json:"prefix"`
	PID    int    `json:"pid"`
	// Uptime is when the snapshot was taken, on the daemon's clock: the
	// time base for rates computed from two snapshots' counters.
	Uptime time.Duration `json:"uptime_ns"`
	// CPU is the user and system CPU time the daemon has used so far: the
	// cost of the emulation, to tell it apart from the systems' own.
	CPU   time.Duration `json:"cpu_ns"`
	Sites []Site        `json:"sites"`
	// Links lists every direction of every link, A→B then B→A, in the
	// topology's link order.
	Links []LinkStats `json:"links"`
	// InFlight is the packets queued or on links.
	InFlight int `json:"in_flight"`
	// Unroutable counts, per sending site, packets that were not IPv4 or
	// not addressed to a lab site; NoRoute, packets to a site the static
	// routes cannot reach. Sites with none are omitted.
	Unroutable  map[string]uint64 `json:"unroutable,omitempty"`
	NoRoute     map[string]uint64 `json:"no_route,omitempty"`
	WriteErrors uint64            `json:"write_errors,omitempty"`
}

// Link returns the stats of the direction from → to.
func (s *Status) Link(from, to string) (LinkStats, bool) {
	for _, l := range s.Links {
		if l.From == from && l.To == to {
			return l, true
		}
	}
	return LinkStats{}, false
}

// Control API paths (HTTP over the unix socket).
const (
	pathStatus  = "/v1/status"
	pathLinks   = "/v1/links/"
	pathMetrics = "/metrics"
)

type apiError struct {
	Error string `json:"error"`
}

func (d *daemon) handler() http.Handler {
	reg := prometheus.NewRegistry()
	// The process metrics tell an experiment whether the emulator itself
	// ran short of CPU.
	reg.MustRegister(newCollector(d), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
	mux := http.NewServeMux()
	mux.Handle("GET "+pathMetrics, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET "+pathStatus, func(w http.ResponseWriter, r *http.Request) {
		var s *Status
		if err := d.do(r.Context(), func() { s = d.status() }); err != nil {
			reply(w, http.StatusServiceUnavailable, apiError{err.Error()})
			return
		}
		reply(w, http.StatusOK, s)
	})
	linkOp := func(op func(a, b string, body []byte) error) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
			if err != nil {
				reply(w, http.StatusBadRequest, apiError{err.Error()})
				return
			}
			a, b := r.PathValue("a"), r.PathValue("b")
			var opErr error
			if err := d.do(r.Context(), func() { opErr = op(a, b, body) }); err != nil {
				reply(w, http.StatusServiceUnavailable, apiError{err.Error()})
				return
			}
			if opErr != nil {
				reply(w, http.StatusBadRequest, apiError{opErr.Error()})
				return
			}
			d.log.Info("link changed", zap.String("a", a), zap.String("b", b), zap.String("request", r.URL.Path), zap.ByteString("change", body))
			reply(w, http.StatusOK, struct{}{})
		}
	}
	mux.HandleFunc("POST "+pathLinks+"{a}/{b}/set", linkOp(func(a, b string, body []byte) error {
		var c Change
		if err := json.Unmarshal(body, &c); err != nil {
			return fmt.Errorf("link change: %w", err)
		}
		return d.net.Set(d.now(), a, b, c)
	}))
	mux.HandleFunc("POST "+pathLinks+"{a}/{b}/cut", linkOp(func(a, b string, _ []byte) error { return d.net.Cut(d.now(), a, b) }))
	mux.HandleFunc("POST "+pathLinks+"{a}/{b}/heal", linkOp(func(a, b string, _ []byte) error { return d.net.Heal(a, b) }))
	return mux
}

func reply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// controlClient talks to a daemon's control socket.
type controlClient struct {
	http *http.Client
}

func newControlClient(socket string) *controlClient {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		DisableKeepAlives: true,
	}
	return &controlClient{http: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
}

func (c *controlClient) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://lab"+path, body)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("lab control socket: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("lab control socket: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e apiError
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			return errors.New(e.Error)
		}
		return fmt.Errorf("lab control socket: %s", resp.Status)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}

func linkPath(a, b, op string) string {
	return pathLinks + url.PathEscape(a) + "/" + url.PathEscape(b) + "/" + op
}
