package content

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Attribute is one named value of a message.
type Attribute struct {
	Name  string
	Value Value
}

// Message is a set of attributes with distinct names, kept sorted by name,
// plus opaque payload bytes that no predicate looks at. Build one with
// NewMessage or MessageFrom; the zero Message has no attributes.
type Message struct {
	attrs   []Attribute
	Payload []byte
}

// NewMessage returns a message with the given attributes. It reports an error
// for an empty name, an invalid value, or a name given twice.
func NewMessage(attrs []Attribute, payload []byte) (Message, error) {
	owned := make([]Attribute, len(attrs))
	copy(owned, attrs)
	return NewMessageOwned(owned, payload)
}

// NewMessageOwned is NewMessage for a slice the message may keep: it sorts
// attrs in place instead of copying it (decoders build one slice per
// message and hand it over). The caller must not use attrs afterwards.
func NewMessageOwned(attrs []Attribute, payload []byte) (Message, error) {
	// Check in input order so that positions in errors are the caller's.
	sorted := true
	for i, a := range attrs {
		if a.Name == "" {
			return Message{}, fmt.Errorf("message attribute %d: empty name", i)
		}
		if !a.Value.IsValid() {
			return Message{}, fmt.Errorf("message attribute %d (%s): invalid value", i, FormatName(a.Name))
		}
		if i > 0 && attrs[i-1].Name >= a.Name {
			sorted = false
		}
	}
	if !sorted {
		// slices.SortFunc, unlike sort.Slice, neither reflects nor
		// allocates: publishing builds one Message per message. Clients
		// send names sorted, so this is the exception.
		slices.SortFunc(attrs, func(a, b Attribute) int { return strings.Compare(a.Name, b.Name) })
		for i := 1; i < len(attrs); i++ {
			if attrs[i-1].Name == attrs[i].Name {
				return Message{}, fmt.Errorf("message attribute %s given twice", FormatName(attrs[i].Name))
			}
		}
	}
	return Message{attrs: attrs, Payload: payload}, nil
}

// MessageFrom builds a message from a map, which cannot hold a name twice.
// It panics on an empty name or invalid value: it is meant for tests and
// literals; use NewMessage for input.
func MessageFrom(attrs map[string]Value) Message {
	list := make([]Attribute, 0, len(attrs))
	for n, v := range attrs {
		list = append(list, Attribute{Name: n, Value: v})
	}
	m, err := NewMessage(list, nil)
	if err != nil {
		panic(err)
	}
	return m
}

// Attributes returns the attributes sorted by name. The slice is shared:
// do not modify it.
func (m Message) Attributes() []Attribute { return m.attrs }

// Len returns the number of attributes.
func (m Message) Len() int { return len(m.attrs) }

// Get returns the value of the named attribute.
func (m Message) Get(name string) (Value, bool) {
	// Messages are small (tens of attributes): a linear scan beats binary
	// search below ~16 and is never much worse.
	if len(m.attrs) <= 16 {
		for i := range m.attrs {
			if m.attrs[i].Name == name {
				return m.attrs[i].Value, true
			}
		}
		return Value{}, false
	}
	i := sort.Search(len(m.attrs), func(i int) bool { return m.attrs[i].Name >= name })
	if i < len(m.attrs) && m.attrs[i].Name == name {
		return m.attrs[i].Value, true
	}
	return Value{}, false
}

// String renders the attributes as name=literal pairs for logs, names in
// the predicate language's syntax so that odd names stay unambiguous.
func (m Message) String() string {
	var b strings.Builder
	b.WriteByte('[')
	for i, a := range m.attrs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(FormatName(a.Name))
		b.WriteByte('=')
		b.WriteString(a.Value.Literal())
	}
	b.WriteByte(']')
	return b.String()
}
