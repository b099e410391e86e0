package content

import (
	"fmt"
	"testing"
)

const designExample = `agency = "AP" && priority = 2 || keywords contains "Italy" || price > 20.5 && stock prefix "XY"`

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(designExample)))
	for b.Loop() {
		if _, err := Parse(designExample); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPredicateString(b *testing.B) {
	p := MustParse(designExample)
	b.ReportAllocs()
	for b.Loop() {
		_ = p.String()
	}
}

// tenAttributes is shaped like the Carzaniga09 §5.1.4 workload: ten attributes,
// six strings and four ints.
func tenAttributes(priority int64, stock string) Message {
	return MessageFrom(map[string]Value{
		"agency": String("Reuters"), "date": String("29/08/2008"), "title": String("Italian prime minister resigns"),
		"keywords": String("politics Europe"), "url": String("http://example.org/news/1"), "stock": String(stock),
		"priority": Int(priority), "price": Int(25), "volume": Int(1000), "rank": Int(7),
	})
}

func BenchmarkPredicateMatches(b *testing.B) {
	p := MustParse(designExample)
	for _, tc := range []struct {
		name string
		m    Message
		want bool
	}{
		{"last-filter", tenAttributes(1, "XYZ"), true}, // evaluates every filter
		{"no-match", tenAttributes(1, "ABC"), false},
		{"first-filter", MessageFrom(map[string]Value{"agency": String("AP"), "priority": Int(2)}), true},
	} {
		if p.Matches(tc.m) != tc.want {
			b.Fatalf("%s: Matches(%s) != %v", tc.name, tc.m, tc.want)
		}
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p.Matches(tc.m)
			}
		})
	}
}

// BenchmarkMessageGet looks up every attribute and one missing name, with
// names shaped like the workload's ("a00", "a01", ...), on both sides of the
// linear-scan/binary-search switch at 16.
func BenchmarkMessageGet(b *testing.B) {
	for _, n := range []int{10, 16, 17, 64} {
		attrs := make([]Attribute, n)
		keys := make([]string, 0, n+1)
		for i := range attrs {
			attrs[i] = Attribute{Name: fmt.Sprintf("a%02d", i), Value: Int(int64(i))}
			keys = append(keys, fmt.Sprintf("a%02d", i)) // not the same string header
		}
		keys = append(keys, "missing")
		m, err := NewMessage(attrs, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, k := range keys {
					m.Get(k)
				}
			}
		})
	}
}

func BenchmarkNewMessage(b *testing.B) {
	attrs := tenAttributes(1, "XYZ").Attributes()
	rev := make([]Attribute, len(attrs))
	for i, a := range attrs {
		rev[len(attrs)-1-i] = a
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewMessage(rev, nil); err != nil {
			b.Fatal(err)
		}
	}
}
