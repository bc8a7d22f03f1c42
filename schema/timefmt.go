package schema

import "math"

// parseRFC3339 parses an RFC 3339 date-time,
// YYYY-MM-DD(T|t)hh:mm:ss[.fraction](Z|z|±hh:mm), into unix milliseconds,
// truncating sub-millisecond digits towards the past, without allocating.
// It follows RFC 3339 §5.6: years 0000–9999, seconds 00–59 (no leap
// seconds, as in Go's time package), one or more fraction digits after a
// '.', "T"/"Z" in either case, offsets up to ±23:59. Unlike time.Parse it
// rejects ',' as the fraction separator and offsets such as +24:00.
func parseRFC3339(s []byte) (int64, bool) {
	if len(s) < len("2006-01-02T15:04:05Z") {
		return 0, false
	}
	num := func(i, n int) (int, bool) { // n decimal digits at i
		v := 0
		for _, c := range s[i : i+n] {
			if c < '0' || c > '9' {
				return 0, false
			}
			v = v*10 + int(c-'0')
		}
		return v, true
	}
	year, ok1 := num(0, 4)
	month, ok2 := num(5, 2)
	day, ok3 := num(8, 2)
	hour, ok4 := num(11, 2)
	minute, ok5 := num(14, 2)
	sec, ok6 := num(17, 2)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) ||
		s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') || s[13] != ':' || s[16] != ':' ||
		month < 1 || month > 12 || day < 1 || day > daysIn(month, year) ||
		hour > 23 || minute > 59 || sec > 59 {
		return 0, false
	}
	i := 19
	var ms int64 // the first three fraction digits
	if s[i] == '.' {
		i++
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			if i-start < 3 {
				ms = ms*10 + int64(s[i]-'0')
			}
			i++
		}
		n := i - start
		if n == 0 {
			return 0, false
		}
		for ; n < 3; n++ {
			ms *= 10
		}
	}
	if i >= len(s) {
		return 0, false
	}
	offset := 0 // seconds east of UTC
	switch s[i] {
	case 'Z', 'z':
		i++
	case '+', '-':
		if len(s)-i != 6 || s[i+3] != ':' {
			return 0, false
		}
		oh, ok1 := num(i+1, 2)
		om, ok2 := num(i+4, 2)
		if !ok1 || !ok2 || oh > 23 || om > 59 {
			return 0, false
		}
		offset = (oh*60 + om) * 60
		if s[i] == '-' {
			offset = -offset
		}
		i += 6
	default:
		return 0, false
	}
	if i != len(s) {
		return 0, false
	}
	secs := daysFromCivil(int64(year), month, day)*86400 + int64(hour*3600+minute*60+sec-offset)
	return secs*1000 + ms, true
}

// daysIn returns the number of days of month in year (proleptic Gregorian).
func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil returns the days from 1970-01-01 to the given proleptic
// Gregorian date (H. Hinnant, "chrono-Compatible Low-Level Date
// Algorithms", days_from_civil).
func daysFromCivil(y int64, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y
	if era < 0 {
		era -= 399
	}
	era /= 400
	yoe := y - era*400 // [0, 399]
	mp := int64(m + 9)
	if m > 2 {
		mp = int64(m - 3)
	}
	doy := (153*mp+2)/5 + int64(d) - 1 // [0, 365]
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// Limits of float milliseconds that convert to int64 exactly: ±2^63 less
// one ulp at that magnitude (2^63 − 1024 is the largest float64 below 2^63).
const maxFloatMillis = 1<<63 - 1024

// floatMillis rounds a float number of milliseconds to int64, reporting
// false when it does not fit.
func floatMillis(f float64) (int64, bool) {
	r := math.Round(f)
	if !(r >= -maxFloatMillis && r <= maxFloatMillis) {
		return 0, false
	}
	return int64(r), true
}
