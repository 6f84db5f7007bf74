// Package english words counts for messages: the plural of a noun after a number. It is shared
// by the commands, the engines and the outputs, and knows nothing of plans.
package english

import (
	"strconv"
	"strings"
)

// Plural formats a count with its noun for messages: "1 recv", "3 recvs", "2 entries",
// "2 mismatches".
func Plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	switch l := len(noun); {
	case l > 1 && noun[l-1] == 'y' && !strings.ContainsRune("aeiou", rune(noun[l-2])):
		noun = noun[:l-1] + "ies"
	case strings.HasSuffix(noun, "s"), strings.HasSuffix(noun, "x"), strings.HasSuffix(noun, "ch"), strings.HasSuffix(noun, "sh"):
		noun += "es"
	default:
		noun += "s"
	}
	return strconv.Itoa(n) + " " + noun
}
