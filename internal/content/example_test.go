package content_test

import (
	"errors"
	"fmt"

	"github.com/dripmesh/drip/internal/content"
)

func ExampleParse() {
	p, err := content.Parse(`agency = "AP" && priority = 2 || keywords contains "Italy"`)
	if err != nil {
		fmt.Println(err)
		return
	}
	// The news item of Carzaniga09 §2.1.
	m := content.MessageFrom(map[string]content.Value{
		"agency":   content.String("AP"),
		"title":    content.String("Italian prime minister resigns"),
		"keywords": content.String("politics Italy"),
		"priority": content.Int(-1),
	})
	fmt.Println(len(p), "filters")
	fmt.Println(p.Matches(m))
	fmt.Println(p[0].Matches(m), p[1].Matches(m))
	// Output:
	// 2 filters
	// true
	// false true
}

func ExampleParse_error() {
	_, err := content.Parse(`price > 20.5 && stock prefix 3`)
	var pe *content.ParseError
	if errors.As(err, &pe) {
		fmt.Println(pe.Offset)
	}
	fmt.Println(err)
	// Output:
	// 22
	// predicate: at byte 22: operator prefix does not apply to the int value at byte 29
}

func ExamplePredicate_String() {
	p := content.MustParse("a=1&&exists exists||f>=3.\t|| s prefix \"\\x41\"")
	fmt.Println(p)
	// Output: a = 1 && "exists" exists || f >= 3.0 || s prefix "A"
}
