package dsl

// Closest returns the word of known that word is most likely a misspelling of, or "" when none
// is close: at most one edit away for short words, two for words of six letters or more (edits
// are Levenshtein's insertions, deletions and substitutions); ties go to the alphabetically first.
// One-letter words get no suggestion: any other one-letter word is one edit away.
func Closest(word string, known []string) string {
	if len(word) < 2 || len(word) > 64 {
		return ""
	}
	limit := min(max(len(word)/3, 1), 2)
	best, bestD := "", limit+1
	for _, k := range known {
		if k == word {
			continue
		}
		if d := editDistance(word, k); d < bestD || (d == bestD && best != "" && k < best) {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of two words.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
