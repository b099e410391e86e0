package topology

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Topology is a mesh description.
type Topology struct {
	Mesh    string   `yaml:"mesh"`
	Brokers []Broker `yaml:"brokers"`
	Links   []Link   `yaml:"links"`
}

// Broker is one broker of the mesh.
type Broker struct {
	Name string `yaml:"name"`
	// ID is the router ID; defaults to the broker's position in the list.
	ID      *uint32 `yaml:"id,omitempty"`
	Client  string  `yaml:"client,omitempty"`  // client API address
	Peer    string  `yaml:"peer,omitempty"`    // peer link address
	Metrics string  `yaml:"metrics,omitempty"` // Prometheus address
}

// Link joins two brokers. The WAN properties are for emulators (the lab,
// the netem sidecar); brokers only use the weight.
type Link struct {
	A      string `yaml:"a"`
	B      string `yaml:"b"`
	Weight uint32 `yaml:"weight,omitempty"` // link cost; default 1
	// Bandwidth in bytes per second, written with a unit: "1MBps",
	// "500KBps", "8Mbit" (bits), or a plain number of bytes per second.
	Bandwidth Rate     `yaml:"bandwidth,omitempty"`
	Delay     Duration `yaml:"delay,omitempty"` // one way
	Jitter    Duration `yaml:"jitter,omitempty"`
	// Loss is a probability in [0,1], or a percentage like "0.5%".
	Loss Probability `yaml:"loss,omitempty"`
}

// Load reads and validates a topology file.
func Load(path string) (*Topology, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Parse decodes and validates a topology; unknown fields are errors, so a
// typo is not silently ignored.
func Parse(data []byte) (*Topology, error) {
	var t Topology
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("topology: %w", err)
	}
	if err := t.normalize(); err != nil {
		return nil, err
	}
	return &t, nil
}

// Marshal renders t as YAML.
func (t *Topology) Marshal() ([]byte, error) { return yaml.Marshal(t) }

// normalize fills default IDs and validates.
func (t *Topology) normalize() error {
	var errs []error
	if t.Mesh == "" {
		t.Mesh = "drip"
	}
	if len(t.Brokers) == 0 {
		errs = append(errs, errors.New("topology has no brokers"))
	}
	names := map[string]bool{}
	ids := map[uint32]string{}
	for i := range t.Brokers {
		b := &t.Brokers[i]
		if b.ID == nil {
			id := uint32(i)
			b.ID = &id
		}
		switch {
		case b.Name == "":
			errs = append(errs, fmt.Errorf("broker %d has no name", i))
		case names[b.Name]:
			errs = append(errs, fmt.Errorf("broker name %q is used twice", b.Name))
		}
		if other, dup := ids[*b.ID]; dup {
			errs = append(errs, fmt.Errorf("brokers %q and %q share router ID %d", other, b.Name, *b.ID))
		}
		names[b.Name] = true
		ids[*b.ID] = b.Name
	}
	pairs := map[[2]string]bool{}
	for i := range t.Links {
		l := &t.Links[i]
		if l.Weight == 0 {
			l.Weight = 1
		}
		switch {
		case !names[l.A] || !names[l.B]:
			errs = append(errs, fmt.Errorf("link %d (%s–%s) names an unknown broker", i, l.A, l.B))
		case l.A == l.B:
			errs = append(errs, fmt.Errorf("link %d joins %s to itself", i, l.A))
		}
		key := [2]string{min(l.A, l.B), max(l.A, l.B)}
		if pairs[key] {
			errs = append(errs, fmt.Errorf("link %d (%s–%s) is listed twice", i, l.A, l.B))
		}
		pairs[key] = true
		if l.Loss < 0 || l.Loss > 1 {
			errs = append(errs, fmt.Errorf("link %d (%s–%s): loss %v is not in [0, 1]", i, l.A, l.B, float64(l.Loss)))
		}
		if l.Delay < 0 || l.Jitter < 0 || l.Bandwidth < 0 {
			errs = append(errs, fmt.Errorf("link %d (%s–%s): negative delay, jitter or bandwidth", i, l.A, l.B))
		}
	}
	return errors.Join(errs...)
}

// Find returns the broker with the given name.
func (t *Topology) Find(name string) (Broker, bool) {
	for _, b := range t.Brokers {
		if b.Name == name {
			return b, true
		}
	}
	return Broker{}, false
}

// Neighbor is a broker adjacent to another and the link between them.
type Neighbor struct {
	Broker Broker
	Link   Link
}

// Neighbors lists the brokers linked to name, in router ID order.
func (t *Topology) Neighbors(name string) []Neighbor {
	var out []Neighbor
	for _, l := range t.Links {
		other := ""
		switch name {
		case l.A:
			other = l.B
		case l.B:
			other = l.A
		default:
			continue
		}
		b, _ := t.Find(other)
		out = append(out, Neighbor{Broker: b, Link: l})
	}
	sort.Slice(out, func(i, j int) bool { return *out[i].Broker.ID < *out[j].Broker.ID })
	return out
}

// Rate is a bandwidth in bytes per second.
type Rate float64

// UnmarshalYAML accepts "1MBps", "250KBps", "10Mbit", "1Gbit", "1000".
func (r *Rate) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseRate(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*r = v
	return nil
}

// MarshalYAML writes the rate in bytes per second.
func (r Rate) MarshalYAML() (any, error) {
	return strconv.FormatFloat(float64(r), 'f', -1, 64) + "Bps", nil
}

// ParseRate parses a bandwidth: a number with an optional unit, where
// units ending in "Bps" or "B/s" count bytes and "bit"/"bps" count bits,
// with K, M, G as powers of 1000.
func ParseRate(s string) (Rate, error) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := s, ""
	if i >= 0 {
		num, unit = s[:i], strings.TrimSpace(s[i:])
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("bandwidth %q: want a non-negative number with a unit like 1MBps or 10Mbit", s)
	}
	mult := 1.0
	if unit != "" {
		switch unit[0] {
		case 'K', 'k':
			mult, unit = 1e3, unit[1:]
		case 'M':
			mult, unit = 1e6, unit[1:]
		case 'G':
			mult, unit = 1e9, unit[1:]
		}
	}
	switch unit {
	case "", "B", "Bps", "B/s":
	case "bit", "bps", "bit/s":
		mult /= 8
	default:
		return 0, fmt.Errorf("bandwidth %q: unknown unit %q (use Bps or bit, with K, M or G)", s, unit)
	}
	return Rate(v * mult), nil
}

// Duration is a time.Duration written as "20ms".
type Duration time.Duration

// UnmarshalYAML parses a Go duration.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: duration %q: %w", n.Line, n.Value, err)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration as text.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// Probability is a number in [0,1].
type Probability float64

// UnmarshalYAML accepts "0.01" or "1%".
func (p *Probability) UnmarshalYAML(n *yaml.Node) error {
	s := strings.TrimSpace(n.Value)
	scale := 1.0
	if strings.HasSuffix(s, "%") {
		s, scale = strings.TrimSuffix(s, "%"), 0.01
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fmt.Errorf("line %d: loss %q: want a probability like 0.01 or 1%%", n.Line, n.Value)
	}
	*p = Probability(v * scale)
	return nil
}
