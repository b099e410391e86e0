package perf

import (
	"math"
	"strconv"
	"strings"
)

// group prints x rounded to an integer with thousands separators:
// 1,684,911.
func group(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "–"
	}
	s := strconv.FormatInt(int64(math.Round(math.Abs(x))), 10)
	var b strings.Builder
	if x < 0 && math.Round(x) != 0 {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// fixed prints x with d decimals, or – when it is not a number.
func fixed(x float64, d int) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "–"
	}
	return strconv.FormatFloat(x, 'f', d, 64)
}

// percent prints a fraction as a percentage with two decimals.
func percent(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "–"
	}
	return strconv.FormatFloat(100*x, 'f', 2, 64) + "%"
}

// value prints a row's value in its unit.
func value(x Num, unit string) string {
	f := float64(x)
	switch unit {
	case "rate", "count":
		return group(f)
	case "us", "cores":
		return fixed(f, 2)
	case "ms":
		return fixed(f, 3)
	case "fraction":
		return percent(f)
	default:
		return strconv.FormatFloat(f, 'g', 4, 64)
	}
}

// ratio prints a ratio with three significant digits.
func ratio(x Num) string {
	f := float64(x)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "–"
	}
	if math.Abs(f) >= 100 {
		return fixed(f, 0)
	}
	return strconv.FormatFloat(f, 'g', 3, 64)
}
