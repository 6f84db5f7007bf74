//go:build !unix

package budget

// addressLimit: no address-space limit is known outside Unix.
func addressLimit() uint64 { return 0 }
