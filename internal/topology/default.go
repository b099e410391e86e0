package topology

import _ "embed"

//go:embed default.yaml
var defaultYAML []byte

// DefaultYAML is the embedded default topology's text.
func DefaultYAML() []byte { return defaultYAML }

// Default returns the embedded default topology: four brokers on loopback
// in a square with one diagonal (Carzaniga09 §5's 4-broker network).
func Default() *Topology {
	t, err := Parse(defaultYAML)
	if err != nil {
		panic("embedded default topology: " + err.Error())
	}
	return t
}
