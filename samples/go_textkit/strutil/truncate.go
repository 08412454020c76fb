// Package strutil holds the small string helpers textkit's commands share.
package strutil

// Truncate returns s cut to at most n characters, with "…" appended when it was cut.
// A non-positive n gives "".
func Truncate(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Initials returns the first character of each space-separated word, upper-cased.
func Initials(name string) string {
	out := ""
	word := true
	for _, r := range name {
		if r == ' ' {
			word = true
			continue
		}
		if word {
			out += string(toUpper(r))
			word = false
		}
	}
	return out
}

func toUpper(r rune) rune {
	if r >= 'a' && r <= 'z' {
		return r - 'a' + 'A'
	}
	return r
}
