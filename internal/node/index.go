package node

import (
	"time"

	"go.uber.org/zap"

	"github.com/dripmesh/drip/internal/encoding"
	"github.com/dripmesh/drip/internal/qos"
)

// The PREDICATES index: when it is rebuilt, and how a build planned on the
// control plane, run beside it (IndexBuilder), is installed for the data
// plane.

// rebuildPacing is how many times as long as the last PREDICATES rebuild
// took, from its plan to its install on the node's clock, the next one
// waits at least from the last one's start, beyond PredicateRebuildInterval:
// while advertisements keep changing — a flood of subscriptions, an
// adjacency flapping — rebuilds then take at most a tenth of the broker's
// time. A build that indexes only the changes (encoding.Table.Snapshot)
// costs a small part of a full one; on a broker short of CPU either takes
// far longer on the clock, and the pacing backs off with it, instead of
// spending what CPU there is on indexes that the next advertisement makes
// stale. The build itself runs beside the control plane (IndexBuilder), one
// at a time: the pacing bounds the CPU rebuilds take, not how long they
// hold up hellos, which they do not.
const rebuildPacing = 10

// pacing is how long the next PREDICATES build waits beyond
// PredicateRebuildInterval from the last one's start: rebuildPacing times
// the last one's duration, except while the node waits for an index of the
// database it joined with (Joined). That wait holds its readiness and its
// publishers, and the ten builds' worth of pacing it would add — seconds on
// a broker short of CPU — buys nothing while the node serves nobody.
func (n *Node) pacing() time.Duration {
	if n.joinDue && !n.joined {
		return 0
	}
	return rebuildPacing * n.lastBuildTook
}

// compactAfter is how long the PREDICATES index keeps a partial build
// (encoding.Snapshot.Partial) after the last change before it is built
// whole.
const compactAfter = 2 * time.Second

// startBuild plans a build of the PREDICATES index from the table as it is
// now (cheap: encoding.Table.Plan) and has it run, beside the control
// plane if the node has an IndexBuilder. Matching uses the last snapshot
// until InstallIndex publishes this one; what changes meanwhile goes into
// the next.
func (n *Node) startBuild(now time.Time, full bool) {
	b := n.table.Plan(full)
	n.building, n.lastBuild, n.predsDirty = b, now, false
	n.buildingChanged, n.predsChanged = n.predsChanged, 0
	n.buildingGen = n.predsGen
	n.buildingQoS = nil
	if n.classesDirty {
		// Published with the filters they refine.
		n.buildingQoS, n.classesDirty = qos.NewTable(n.classes), false
	}
	if n.builder == nil {
		n.InstallIndex(b.Run())
		return
	}
	n.builder.Start(b)
}

// InstallIndex publishes the PREDICATES index b, which the node's
// IndexBuilder was given and has run, to the data plane (a control-plane
// call).
func (n *Node) InstallIndex(b *encoding.Build) {
	if b == nil || b != n.building {
		n.log.Error("PREDICATES index build handed back that the node is not waiting for; ignored")
		return
	}
	snap := n.table.Install(b)
	n.preds.Store(snap)
	n.indexGen = n.buildingGen
	if n.buildingQoS != nil {
		n.qos.Store(n.buildingQoS)
	}
	n.building, n.buildingQoS = nil, nil
	n.lastBuildTook = n.clock.Since(n.lastBuild)
	if snap.Partial() {
		n.m.rebuildPartial.Observe(n.lastBuildTook.Seconds())
	} else {
		n.lastFullTook = n.lastBuildTook
		n.m.rebuildFull.Observe(n.lastBuildTook.Seconds())
	}
	n.log.Debug("PREDICATES index rebuilt", zap.Int("updates", n.buildingChanged), zap.Bool("partial", snap.Partial()), zap.Duration("took", n.lastBuildTook))
}

// AdvertisementPending reports whether local subscription changes wait to
// be advertised or the PREDICATES index waits to be rebuilt or is being
// rebuilt (a control-plane call; Inspection.Pending carries it across
// goroutines).
func (n *Node) AdvertisementPending() bool {
	return n.adPending.Load() || n.predsDirty || n.building != nil
}
