package lineproto

import (
	"fmt"
	"time"
)

// Precision is the unit of the timestamps of a write.
type Precision struct {
	unit time.Duration
}

// Nanosecond is the default precision.
var Nanosecond = Precision{time.Nanosecond}

// Duration returns the unit of p.
func (p Precision) Duration() time.Duration {
	if p.unit == 0 {
		return time.Nanosecond
	}
	return p.unit
}

// String returns the v1 name of the precision.
func (p Precision) String() string {
	switch p.unit {
	case time.Microsecond:
		return "u"
	case time.Millisecond:
		return "ms"
	case time.Second:
		return "s"
	case time.Minute:
		return "m"
	case time.Hour:
		return "h"
	}
	return "n"
}

// ParsePrecision parses the precision query parameter of a write. v1's
// /write takes n, ns, u, µ, us, ms, s, m and h; v2's /api/v2/write takes
// ns, us, ms and s. Empty means nanoseconds.
func ParsePrecision(s string, v2 bool) (Precision, error) {
	var d time.Duration
	switch s {
	case "", "ns":
		d = time.Nanosecond
	case "us":
		d = time.Microsecond
	case "ms":
		d = time.Millisecond
	case "s":
		d = time.Second
	}
	if d == 0 && !v2 {
		switch s {
		case "n":
			d = time.Nanosecond
		case "u", "µ":
			d = time.Microsecond
		case "m":
			d = time.Minute
		case "h":
			d = time.Hour
		}
	}
	if d == 0 {
		if v2 {
			return Precision{}, fmt.Errorf("invalid precision %q: accepted values are ns, us, ms and s", s)
		}
		return Precision{}, fmt.Errorf("invalid precision %q: accepted values are n, ns, u, us, µ, ms, s, m and h", s)
	}
	return Precision{d}, nil
}
