package exec

// Test-only exports for the external test package (which may import exec/softnic).
var (
	RingAllreduceForTest = ringAllreduce
	ExchangeForTest      = exchange
)
