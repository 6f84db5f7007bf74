package main

import "github.com/aymanbagabas/go-udiff"

// unifiedDiff returns the change from a to b as a unified diff with 3 lines of context, labelled
// name.orig and name, or nothing when they are equal. The library's Myers diff keeps formatting
// diffs cheap: formatting changes few lines.
func unifiedDiff(name string, a, b []byte) []byte {
	return []byte(udiff.Unified(name+".orig", name, string(a), string(b)))
}
