package congestion

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dripmesh/drip/internal/encoding"
)

// coarseFilter is a filter whose flow is coarser than it: the publisher
// limits bits(1), which every message of bits(1, x) matches, and the
// filter takes only bits(1, 2), as a cat-v2 range is limited by what its
// alternatives share and taken by the alternatives.
var coarseFilter = Filter{ID: 1, Bloom: bits(1), Alternatives: []encoding.Bloom{bits(1, 2)}}

// history is a publisher's recent messages, from which a header's record
// of the last five is cut. It keeps a few thousand, not all of a run's
// 200,000: appending to one slice of 256-byte Blooms until it held 51 MB
// was most of these tests' time under -race (copying as it grew).
type history struct{ b []encoding.Bloom }

func (h *history) add(m encoding.Bloom) {
	if len(h.b) == cap(h.b) && len(h.b) >= 4096 {
		// A new array: the records cut from the old one stay as they were.
		h.b = append(make([]encoding.Bloom, 0, 4096), h.b[len(h.b)-5:]...)
	}
	h.b = append(h.b, m)
}

// record is the last five messages (fewer at the start).
func (h *history) record() []encoding.Bloom { return h.b[len(h.b)-min(len(h.b), 5):] }

// TestShareOfACoarseFlow checks the share a subscriber estimates from
// the publication records against the truth: of the publisher's messages
// that the flow's Bloom filter matches (a fraction inFlow of all), a
// fraction share is the filter's. The subscriber receives only the
// filter's messages, so for small shares most gaps outrun the record of
// 5; counting the delivered messages themselves would overstate the
// share there (and still starve the flow).
func TestShareOfACoarseFlow(t *testing.T) {
	taken, coarse, elsewhere := bits(1, 2), bits(1, 3), bits(4, 5)
	for _, inFlow := range []float64{1, 0.3} {
		for _, share := range []float64{0.05, 0.2, 0.5, 1} {
			t.Run(fmt.Sprintf("%.0f%% in the flow, %.0f%% of it taken", 100*inFlow, 100*share), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(100*share), uint64(100*inFlow)))
				s := newSub(t, coarseFilter)
				var hist history
				now := epoch
				for seq := uint64(1); seq <= 200_000; seq++ {
					m := elsewhere
					if rng.Float64() < inFlow {
						m = coarse
						if rng.Float64() < share {
							m = taken
						}
					}
					now = now.Add(time.Millisecond)
					if m == taken {
						s.Receive(&Header{Publisher: 1, Seq: seq, SentAt: now, Rate: 1000, Record: hist.record()}, m, now)
					}
					hist.add(m)
				}
				e := s.sessions[1].entries[1]
				require.NotNil(t, e)
				// The window of 1024 flow messages gives a standard error
				// of at most 7% of the share here.
				assert.InEpsilon(t, share, e.share(DefaultConfig().MaxQuotaScale), 0.25)
			})
		}
	}
}

// TestShareIsOneForAnExactFlow: a filter limited by its own Bloom filter
// asks for what it measures, unscaled, whatever the records show.
func TestShareIsOneForAnExactFlow(t *testing.T) {
	s := newSub(t, Filter{ID: 1, Bloom: bits(1)})
	var hist history
	for seq := uint64(1); seq <= 1000; seq++ {
		m := bits(1, int(seq%7)+2)
		if seq%3 == 0 {
			m = bits(4)
		}
		if m.Has(1) {
			s.Receive(&Header{Publisher: 1, Seq: seq, SentAt: epoch, Rate: 1000, Record: hist.record()}, m, epoch)
		}
		hist.add(m)
	}
	assert.Equal(t, 1.0, s.sessions[1].entries[1].share(100))
}

// TestCoarseFlowDoesNotStarve is the lab's finding in virtual time: a
// subscriber whose filter takes a fifth of the messages its flow's Bloom
// filter matches, behind a link that carries all of them after a first
// second of overload (share 1: the flow is exact, for reference). Counted in the filter's messages and spent on the
// flow's, each round's quota would be (1+α)·0.2 of the last, down to
// MinRate; scaled by the share it measures, the flow carries what the
// subscriber takes.
func TestCoarseFlowDoesNotStarve(t *testing.T) {
	for _, share := range []float64{0.1, 0.2, 0.5, 1} {
		t.Run(fmt.Sprintf("share %.1f", share), func(t *testing.T) {
			sc := scenario{
				cfg:        DefaultConfig(),
				controlled: true,
				// An overload (400 of the subscriber's a second, on a
				// link of 150) makes the flow, then 100 of the
				// subscriber's a second, which the link carries.
				publish: func(t time.Duration) float64 {
					if t < time.Second {
						return 400 / share
					}
					return 100 / share
				},
				rho:      share,
				filter:   &coarseFilter,
				other:    bits(1, 3),
				link:     &bottleneck{rate: 150, limit: 20, delay: 40 * time.Millisecond},
				back:     40 * time.Millisecond,
				duration: 40 * time.Second,
				step:     time.Millisecond,
				seed:     5,
				lateFrom: 20 * time.Second,
			}
			out := sc.run()
			st := out.pub.Stats()
			wanted := 100.0 * 20 // the subscriber's messages in the last 20 s
			t.Logf("share %.1f: delivered %d in the last 20 s of %.0f offered; %d held, flows %+v",
				share, out.lateDelivered, wanted, st.HeldMessages, out.pub.Flows(epoch.Add(sc.duration)))
			require.Positive(t, out.dropped, "the first second must overload the link, or no flow is limited")
			assert.Greater(t, float64(out.lateDelivered), 0.9*wanted, "the flow must carry what its subscriber takes")
		})
	}
}

// TestCoarseFiltersMeasureLossOnTheExactOnes checks Receive's loss
// measurement for a subscriber with an exact filter and a coarse one,
// whose Bloom filter, in the records, matches three times as many
// messages as it takes. Three subscribers receive the same messages with each lost
// at rate loss: one whose coarse filter is marked Coarse, one whose is
// not, and an ideal one whose second filter's Bloom filter is exactly
// what it takes. The marked one must count loss events at the ideal's
// rate per message it measures; the unmarked one reads gaps of messages
// it never took as losses, which is what this guards against.
func TestCoarseFiltersMeasureLossOnTheExactOnes(t *testing.T) {
	exactMsg, coarseTaken, coarseOnly, elsewhere := bits(10, 11), bits(1, 2), bits(1, 3), bits(4, 5)
	exactF := Filter{ID: 2, Bloom: bits(10, 11)}
	for _, loss := range []float64{0, 0.02} {
		t.Run(fmt.Sprintf("loss %.0f%%", 100*loss), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.InitialRTT = time.Millisecond // no two losses in one event
			subs := map[string]*Subscriber{}
			for name, second := range map[string]Filter{
				"marked":   {ID: 1, Bloom: bits(1), Coarse: true},
				"unmarked": {ID: 1, Bloom: bits(1)},
				"ideal":    {ID: 1, Bloom: bits(1, 2)},
			} {
				s, err := NewSubscriber(7, cfg)
				require.NoError(t, err)
				s.SetFilters([]Filter{exactF, second})
				subs[name] = s
			}
			rng := rand.New(rand.NewPCG(1, uint64(1000*loss)))
			var hist history
			received, receivedExact := 0, 0
			now := epoch
			for seq := uint64(1); seq <= 200_000; seq++ {
				var m encoding.Bloom
				switch x := rng.Float64(); {
				case x < 0.1:
					m = exactMsg
				case x < 0.3:
					m = coarseTaken
				case x < 0.7:
					m = coarseOnly
				default:
					m = elsewhere
				}
				now = now.Add(10 * time.Millisecond)
				if (m == exactMsg || m == coarseTaken) && rng.Float64() >= loss {
					received++
					if m == exactMsg {
						receivedExact++
					}
					h := &Header{Publisher: 1, Seq: seq, SentAt: now, Rate: 100, Record: hist.record()}
					for _, s := range subs {
						s.Receive(h, m, now)
					}
				}
				hist.add(m)
			}
			events := func(name string) float64 { return float64(subs[name].sessions[1].loss.events) }
			if loss == 0 {
				assert.Zero(t, events("marked"))
				assert.Zero(t, events("ideal"))
				assert.Greater(t, events("unmarked"), 1000.0, "the guard cannot fail")
				return
			}
			// Gaps the record of 5 does not cover hide a few losses
			// from all three alike.
			assert.InEpsilon(t, loss, events("ideal")/float64(received), 0.25)
			assert.InEpsilon(t, loss, events("marked")/float64(receivedExact), 0.25)
			assert.Greater(t, events("unmarked")/float64(received), 5*loss)
		})
	}
}
