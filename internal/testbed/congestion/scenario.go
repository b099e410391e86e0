package congestion

import (
	"fmt"
	"strings"
	"time"

	"github.com/dripmesh/drip/internal/topology"
)

// Scenario names, one per figure of Malekpour11 §IV.
const (
	Fig7  = "fig7"  // one pair, 500 kbit/s, rate ramp then bursts
	Fig8  = "fig8"  // one pair, bottleneck alternating 2 and 1 Mbit/s
	Fig9  = "fig9"  // three pairs of different demands, bottleneck cut twice
	Fig10 = "fig10" // one pair beside a TCP flow on 1 Mbit/s
	IVE   = "ive"   // 8 brokers, many subscribers, two fast publishers
)

// Names lists the scenarios in the order `--scenario all` runs them.
func Names() []string { return []string{Fig7, Fig8, Fig9, Fig10, IVE} }

// kbit is a link rate in bytes per second.
func kbit(k float64) float64 { return k * 1000 / 8 }

// Segment is one part of a publisher's schedule: a rate going linearly
// from From to To messages per second over Length, sent in bursts of On
// followed by Off of silence when On is set.
type Segment struct {
	Length time.Duration `json:"length_ns"`
	From   float64       `json:"from"`
	To     float64       `json:"to"`
	On     time.Duration `json:"on_ns,omitempty"`
	Off    time.Duration `json:"off_ns,omitempty"`
}

// Schedule is a publisher's rate over time: its segments one after the
// other, then nothing.
type Schedule []Segment

// Rate is the publishing rate at t from the start (messages per second).
func (s Schedule) Rate(t time.Duration) float64 {
	for _, seg := range s {
		if t >= seg.Length {
			t -= seg.Length
			continue
		}
		if seg.On > 0 && t%(seg.On+seg.Off) >= seg.On {
			return 0
		}
		return seg.From + (seg.To-seg.From)*float64(t)/float64(seg.Length)
	}
	return 0
}

// Length is the schedule's total length.
func (s Schedule) Length() time.Duration {
	var d time.Duration
	for _, seg := range s {
		d += seg.Length
	}
	return d
}

// Constant is a schedule of rate for d.
func Constant(rate float64, d time.Duration) Schedule {
	return Schedule{{Length: d, From: rate, To: rate}}
}

// Publisher is one publishing client: where it runs and what it sends.
type Publisher struct {
	Site     string   `json:"site"`
	Schedule Schedule `json:"schedule"`
}

// Subscriber is one subscribing client. Publisher p's message number n
// carries the attributes pub = p and k = K(n); the subscriber takes the
// messages of Publishers whose k lies in [KFrom, KTo): a fraction
// (KTo − KFrom)/100 of each.
type Subscriber struct {
	Site       string `json:"site"`
	Publishers []int  `json:"publishers"`
	KFrom      int    `json:"k_from"`
	KTo        int    `json:"k_to"`
	// Group names the subscribers whose deliveries are summed in one
	// series: one per pair in Figs. 7–10, behind the bottleneck or not in
	// §IV-E.
	Group string `json:"group"`
}

// Predicate is the subscriber's filter in drip's language: one filter
// per decade of k it takes (messages carry d = k/10), of pub = p for each
// publisher when it takes from one, or pub = p alone when it takes all of
// it. Equalities, not a range: a range is a disjunction of Bloom filters
// under cat-v2, and the client asks publishers to limit what the
// disjuncts share, a superset of the filter's messages, while it counts
// the quota in the filter's own; the flow then shrinks towards
// MinRate (docs/results/congestion.md, "in the lab"). KFrom and KTo are
// multiples of 10.
func (s Subscriber) Predicate() string {
	if len(s.Publishers) == 1 && s.KFrom == 0 && s.KTo == 100 {
		return fmt.Sprintf("pub = %d", s.Publishers[0])
	}
	var fs []string
	for d := s.KFrom / 10; d < s.KTo/10; d++ {
		if len(s.Publishers) == 1 {
			fs = append(fs, fmt.Sprintf("pub = %d && d = %d", s.Publishers[0], d))
		} else {
			fs = append(fs, fmt.Sprintf("d = %d", d))
		}
	}
	return strings.Join(fs, " || ")
}

// RangePredicate is the subscriber's filter as one range of k (and pub =
// p when it takes from one publisher): what the first runs used, kept to
// measure coarse flows (Config.RangeFilters). Under cat-v2 a range's
// Bloom filters are a disjunction, and the flow a publisher limits is
// what they share, a superset of the filter's messages.
func (s Subscriber) RangePredicate() string {
	if len(s.Publishers) == 1 {
		return fmt.Sprintf("pub = %d && k >= %d && k < %d", s.Publishers[0], s.KFrom, s.KTo)
	}
	return fmt.Sprintf("k >= %d && k < %d", s.KFrom, s.KTo)
}

// Matches says whether the subscriber takes publisher p's message n.
func (s Subscriber) Matches(p int, n uint64) bool {
	k := K(n)
	if k < s.KFrom || k >= s.KTo {
		return false
	}
	for _, q := range s.Publishers {
		if q == p {
			return true
		}
	}
	return false
}

// K is the attribute k of a publisher's message number n, in [0, 100): a
// hash of n, so that the messages a subscriber takes are spread among
// those it does not as if each were drawn independently, as Malekpour11
// §III-C assumes when it reads a gap longer than the publication record.
// (With k = n mod 100 a subscriber taking 20% would see runs of 20
// followed by gaps of 80, each read as a loss.)
func K(n uint64) int {
	// splitmix64's finaliser.
	n += 0x9e3779b97f4a7c15
	n = (n ^ n>>30) * 0xbf58476d1ce4e5b9
	n = (n ^ n>>27) * 0x94d049bb133111eb
	return int((n ^ n>>31) % 100)
}

// Step sets the bottleneck's bandwidth (bytes per second) at At from the
// start of publishing.
type Step struct {
	At        time.Duration `json:"at_ns"`
	Bandwidth float64       `json:"bandwidth"`
}

// Scenario is one experiment: a topology with one bottleneck link, the
// clients, the bottleneck's schedule, and, for Fig. 10, a TCP flow.
type Scenario struct {
	Name     string             `json:"name"`
	Topology *topology.Topology `json:"-"`
	// Bottleneck is the link (A → B carries the content) whose bandwidth
	// Steps set; Steps[0] is its bandwidth from the start.
	Bottleneck  [2]string    `json:"bottleneck"`
	Steps       []Step       `json:"steps"`
	Publishers  []Publisher  `json:"publishers"`
	Subscribers []Subscriber `json:"subscribers"`
	// TCPFrom, when positive, starts a bulk TCP transfer from Bottleneck A
	// to B at that time, until the end.
	TCPFrom time.Duration `json:"tcp_from_ns,omitempty"`
	// Peers runs the scenario on NATS and ActiveMQ as well.
	Peers bool `json:"peers,omitempty"`
}

// Length is how long the publishers send.
func (s Scenario) Length() time.Duration {
	var d time.Duration
	for _, p := range s.Publishers {
		d = max(d, p.Schedule.Length())
	}
	return d
}

// Groups lists the subscriber groups in order of first appearance.
func (s Scenario) Groups() []string {
	var out []string
	seen := map[string]bool{}
	for _, sub := range s.Subscribers {
		if !seen[sub.Group] {
			seen[sub.Group] = true
			out = append(out, sub.Group)
		}
	}
	return out
}

// delay is every link's one-way delay: a continental round trip of 40 ms.
const delay = 20 * time.Millisecond

// pair is two sites, the publishers' p and the subscribers' s, joined by
// the bottleneck.
func pair(name string, bandwidth float64) *topology.Topology {
	one, two := uint32(1), uint32(2)
	return &topology.Topology{Mesh: name,
		Brokers: []topology.Broker{{Name: "p", ID: &one}, {Name: "s", ID: &two}},
		Links:   []topology.Link{{A: "p", B: "s", Weight: 1, Bandwidth: topology.Rate(bandwidth), Delay: topology.Duration(delay)}},
	}
}

// Scenarios are Malekpour11 §IV's experiments scaled to this machine
// (doc.go says how): every duration by timeScale; every bandwidth, and
// with it every publishing rate, by bandwidthScale, with messages of
// payload bytes. Rates are given in kbit/s of payload at the paper's
// bandwidths.
func Scenarios(timeScale, bandwidthScale float64, payload int) map[string]Scenario {
	d := func(s float64) time.Duration { return time.Duration(s * timeScale * float64(time.Second)) }
	bw := func(k float64) float64 { return kbit(k) * bandwidthScale }
	msgs := func(k float64) float64 { return bw(k) / float64(payload) }
	one := Subscriber{Site: "s", Publishers: []int{0}, KTo: 100, Group: "pair"}
	out := map[string]Scenario{}

	// Fig. 7: 400 kbit/s of payload ramping to 4000 kbit/s, then bursts
	// at 4000 kbit/s, through 500 kbit/s.
	out[Fig7] = Scenario{Name: Fig7, Topology: pair(Fig7, bw(500)), Bottleneck: [2]string{"p", "s"},
		Steps: []Step{{Bandwidth: bw(500)}},
		Publishers: []Publisher{{Site: "p", Schedule: Schedule{
			{Length: d(10), From: msgs(400), To: msgs(400)},
			{Length: d(20), From: msgs(400), To: msgs(4000)},
			{Length: d(20), From: msgs(4000), To: msgs(4000), On: d(1), Off: d(1)},
		}}},
		Subscribers: []Subscriber{one}, Peers: true}

	// Fig. 8: a publisher offering more than either capacity; the
	// bottleneck alternates 2 and 1 Mbit/s.
	period := d(20)
	out[Fig8] = Scenario{Name: Fig8, Topology: pair(Fig8, bw(2000)), Bottleneck: [2]string{"p", "s"},
		Steps:       []Step{{Bandwidth: bw(2000)}, {At: period, Bandwidth: bw(1000)}, {At: 2 * period, Bandwidth: bw(2000)}, {At: 3 * period, Bandwidth: bw(1000)}},
		Publishers:  []Publisher{{Site: "p", Schedule: Constant(msgs(3000), 4*period)}},
		Subscribers: []Subscriber{one}, Peers: true}

	// Fig. 9: three publishers at 1200 kbit/s whose subscribers take 20%,
	// 50% and 100% of their messages; the bottleneck is cut from 2 to 1
	// to 0.5 Mbit/s.
	phase := d(25)
	f9 := Scenario{Name: Fig9, Topology: pair(Fig9, bw(2000)), Bottleneck: [2]string{"p", "s"},
		Steps: []Step{{Bandwidth: bw(2000)}, {At: phase, Bandwidth: bw(1000)}, {At: 2 * phase, Bandwidth: bw(500)}}}
	for i, k := range []int{20, 50, 100} {
		f9.Publishers = append(f9.Publishers, Publisher{Site: "p", Schedule: Constant(msgs(1200), 3*phase)})
		f9.Subscribers = append(f9.Subscribers, Subscriber{Site: "s", Publishers: []int{i}, KTo: k, Group: fmt.Sprintf("%d%%", k)})
	}
	out[Fig9] = f9

	// Fig. 10: a content flow offering twice the link alone on 1 Mbit/s,
	// joined by a bulk TCP transfer.
	out[Fig10] = Scenario{Name: Fig10, Topology: pair(Fig10, bw(1000)), Bottleneck: [2]string{"p", "s"},
		Steps:      []Step{{Bandwidth: bw(1000)}},
		Publishers: []Publisher{{Site: "p", Schedule: Constant(msgs(2000), d(45))}}, Subscribers: []Subscriber{one},
		TCPFrom: d(15)}

	out[IVE] = ive(d(45), bw(250), msgs(250))
	return out
}

// ive is §IV-E on eight brokers: b1 holds two publishers, each offering
// rate, and reaches b3 and b4 over fast links and b2 over the bottleneck, behind
// which b2 reaches b5–b8. Eight subscribers per broker each take a tenth
// of both publishers' messages (k in one decade), so every message crosses
// the bottleneck and every subscriber behind it competes for it.
func ive(length time.Duration, bottleneck, rate float64) Scenario {
	t := &topology.Topology{Mesh: IVE}
	for i := 1; i <= 8; i++ {
		id := uint32(i)
		t.Brokers = append(t.Brokers, topology.Broker{Name: fmt.Sprintf("b%d", i), ID: &id})
	}
	fast := topology.Rate(20 * bottleneck)
	link := func(a, b int, bw topology.Rate) {
		t.Links = append(t.Links, topology.Link{A: fmt.Sprintf("b%d", a), B: fmt.Sprintf("b%d", b), Weight: 1, Bandwidth: bw, Delay: topology.Duration(delay)})
	}
	link(1, 2, topology.Rate(bottleneck))
	link(1, 3, fast)
	link(1, 4, fast)
	for i := 5; i <= 8; i++ {
		link(2, i, fast)
	}
	s := Scenario{Name: IVE, Topology: t, Bottleneck: [2]string{"b1", "b2"}, Steps: []Step{{Bandwidth: bottleneck}}}
	for range 2 {
		s.Publishers = append(s.Publishers, Publisher{Site: "b1", Schedule: Constant(rate, length)})
	}
	for i := 1; i <= 8; i++ {
		group := "clear"
		if i == 2 || i >= 5 {
			group = "behind"
		}
		for j := range 8 {
			s.Subscribers = append(s.Subscribers, Subscriber{Site: fmt.Sprintf("b%d", i), Publishers: []int{0, 1},
				KFrom: 10 * ((i + j) % 10), KTo: 10*((i+j)%10) + 10, Group: group})
		}
	}
	return s
}
