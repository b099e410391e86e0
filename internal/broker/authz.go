package broker

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dripmesh/drip/internal/authz"
	"github.com/dripmesh/drip/internal/content"
)

// denialLogWindow is how often one client's denials are logged: a client
// retrying a refused publish in a loop writes one line per window, not one
// per attempt.
const denialLogWindow = time.Minute

// maxDenialLogClients bounds the clients whose last logged denial is
// remembered; when it is reached the memory is cleared, which at worst
// logs a client's denial once more.
const maxDenialLogClients = 4096

// authorizer enforces the broker's authorization policy (internal/authz)
// on client streams. Its policy is swapped whole (SetAuthzPolicy); a
// stream keeps the rule it was admitted under until it ends, so a reload
// applies to streams opened after it.
type authorizer struct {
	policy atomic.Pointer[authz.Policy]
	denied *prometheus.CounterVec // op
	log    *zap.Logger
	now    func() time.Time

	mu     sync.Mutex
	logged map[string]time.Time // client identity → last denial logged
}

// grant is what a stream was admitted as: its client's identity and the
// rule that applies to it. The zero grant (no rule) allows everything.
type grant struct {
	rule *authz.Rule
	id   authz.Identity
}

// admit resolves the rule a new stream of op runs under: none when no
// policy is loaded. A client no rule matches is PermissionDenied; a
// malformed authorization header is Unauthenticated.
func (a *authorizer) admit(ctx context.Context, op string) (grant, error) {
	p := a.policy.Load()
	if p == nil {
		return grant{}, nil
	}
	id, err := authz.FromContext(ctx)
	if err != nil {
		a.deny(op, id, "", err)
		return grant{}, status.Error(codes.Unauthenticated, err.Error())
	}
	r, err := p.Match(id)
	if err != nil {
		return grant{}, a.refuse(op, id, err)
	}
	if op == opPublish && r.Publish.IsNone() {
		// Refused before any message: the stream could publish nothing.
		return grant{}, a.refuse(op, id, r.CheckPublish(content.Message{}, 0))
	}
	return grant{rule: r, id: id}, nil
}

// refuse counts and logs an authorization error and turns it into the
// gRPC status the client sees: PermissionDenied for a denial,
// InvalidArgument for a conjunction over the predicate limits.
func (a *authorizer) refuse(op string, id authz.Identity, err error) error {
	var d *authz.DeniedError
	if errors.As(err, &d) {
		a.deny(op, id, d.Rule, err)
		return status.Error(codes.PermissionDenied, err.Error())
	}
	return status.Error(codes.InvalidArgument, err.Error())
}

func (a *authorizer) deny(op string, id authz.Identity, rule string, err error) {
	a.denied.WithLabelValues(op).Inc()
	key := id.String()
	now := a.now()
	a.mu.Lock()
	last, seen := a.logged[key]
	log := !seen || now.Sub(last) >= denialLogWindow
	if log {
		if len(a.logged) >= maxDenialLogClients {
			clear(a.logged)
		}
		a.logged[key] = now
	}
	a.mu.Unlock()
	if log {
		a.log.Warn("client refused by the authorization policy (logged once a minute per client)",
			zap.String("op", op), zap.String("client", key), zap.String("rule", rule), zap.Error(err))
	}
}
