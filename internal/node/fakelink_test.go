package node

import (
	"time"

	"github.com/dripmesh/drip/internal/linkstate"
	"github.com/dripmesh/drip/internal/qos"
)

// fakeLink is a Link in memory: it records what the node sends, takes or
// refuses bundles as told, and says what its fields say.
type fakeLink struct {
	id        uint32
	refuse    bool // refuse every bundle, as a full link that may wait no longer does
	finishing bool
	finished  bool        // PeerFinished
	down      func() bool // Down; nil: false
	pushes    int
	control   []linkstate.Message
}

func (l *fakeLink) Peer() uint32 { return l.id }
func (l *fakeLink) Name() string { return "stub" }
func (l *fakeLink) SendControl(m linkstate.Message) error {
	l.control = append(l.control, m)
	return nil
}
func (l *fakeLink) PushBundle([]byte) bool              { l.pushes++; return !l.refuse }
func (l *fakeLink) PushUrgent([]byte, qos.Urgency) bool { l.pushes++; return !l.refuse }
func (l *fakeLink) Now() int64                          { return 1 }
func (l *fakeLink) SetOneWay(time.Duration)             {}
func (l *fakeLink) LastReceived() int64                 { return 0 }
func (l *fakeLink) Down() bool                          { return l.down != nil && l.down() }
func (l *fakeLink) Finish()                             { l.finishing = true }
func (l *fakeLink) Finishing() bool                     { return l.finishing }
func (l *fakeLink) PeerFinished() bool                  { return l.finished }
func (l *fakeLink) Close(error)                         {}
func (l *fakeLink) Recent(int64) [][]byte               { return nil }
func (l *fakeLink) Unsent(func([]byte) bool) int        { return 0 }
func (l *fakeLink) Congested() bool                     { return false }
