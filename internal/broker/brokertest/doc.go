// Package brokertest runs whole meshes of real brokers for tests.
//
// Sim runs broker.Nodes — the brokers' own routing, matching, forwarding
// and duplicate suppression — in virtual time on one goroutine. Frames
// travel between transport.Links moved frame by frame (TakeFrame, then
// Deliver after the link's delay, in order, through the wire encoding), so
// the links' queues and compression run as in production. Faults model what
// a deployment sees: a killed broker (its streams close, in-flight frames
// to it are lost, it restarts with a new epoch and an empty database), a
// graceful stop (the drain of docs/design.md §10, clients moving
// make-before-break), a cut link, a partition (streams stall and deliver after
// it, adjacencies die by the dead interval), extra delay, a broker whose
// control plane falls behind its links (SlowControl). Clients are modelled
// too: subscribers that fail over to another broker when theirs dies and
// move before theirs drains, keeping the client-side duplicate filter of
// the Go client; publishers that move when their broker drains or dies.
//
// Everything is driven by the seed, with events ordered by (time,
// sequence): the same options produce the same run, frame for frame, so a
// failing seed replays with one command. A Ledger records every published
// message and every delivery, and Check judges a run: no false positive,
// no duplicate on any stream nor at any application, and every message
// published while the mesh was converged — with no disruptive fault until
// it could have been delivered — delivered to every subscriber it matches.
// A broker's restart or a link's heal counts as disruptive only when it
// joins parts of the mesh that could not reach each other: otherwise it
// only adds paths, and routes may move onto them without losing a message
// (a link is advertised only once its database exchange is done).
package brokertest
