// Package authz is drip's content-based authorization (docs/design.md
// §13): a policy file maps client identities to what they may publish and
// what they may see.
//
// A policy is an ordered list of rules. Each rule names the clients it
// applies to — by the common name, a URI SAN or a DNS SAN of their
// verified TLS certificate, by the SHA-256 of a bearer token, or anyone —
// and gives two sides:
//
//   - publish: a predicate every message the client publishes must
//     satisfy; a message outside it is refused (PermissionDenied naming
//     the rule) and nothing of its request is published;
//   - subscribe: a predicate conjoined with whatever the client subscribes
//     to, so that the client sees only messages inside it whatever it asks
//     for. The conjunction is what the broker installs and advertises, so
//     the rule also narrows routing.
//
// Either side may be "all" (no restriction) or "none" (refused outright).
// The first rule whose selector matches one of the client's identities
// decides; a client no rule matches is refused, naming that no rule
// matched. The package holds no state beyond a parsed policy; the broker
// enforces it (internal/broker) and reloads it by swapping the pointer.
package authz
