// Package peerauth authenticates the origin of link-state and predicate
// advertisements with the brokers' peer certificates: it implements
// linkstate.Authenticator.
//
// Each broker signs what it originates with the private key of its peer
// TLS certificate (ECDSA, Ed25519 or RSA: whatever the certificate holds)
// and sends the certificate's DER with the signature, so that a broker can
// verify an advertisement of a router it has never met. A received
// advertisement is accepted only if
//
//   - its certificate chains to the peer CA, allows serverAuth (a broker's,
//     not a client's) and is valid at the injected time — or has expired
//     since, if the advertisement is this router's own from an earlier
//     incarnation, which the core only re-originates past;
//   - the certificate names the advertisement's origin and the mesh as the
//     URI SAN drip://<mesh>/router/<id> (IdentityURI), the same identity
//     the peer handshake checks (broker.ServerConfig.PeerIdentity);
//   - the signature verifies over SHA-256 of a domain-separation string,
//     the mesh name and the advertisement's signed bytes
//     (linkstate AppendSigned: every field but the age).
//
// So a peer that holds a valid certificate for one router, or none, can
// still relay other routers' advertisements but no longer alter or invent
// them. Verified certificates are cached by their SHA-256, bounded, so the
// x509 chain is checked once per certificate rather than per
// advertisement; only the signature is checked per advertisement (and only
// for a copy newer than the one held: the core checks before it installs).
//
// What it does not do: revocation (a stolen key speaks for its router
// until its certificate expires; keep peer certificates short-lived), and
// intermediates (the certificate must be issued by a CA of the peer CA
// file itself).
package peerauth
