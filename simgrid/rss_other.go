//go:build !unix

package simgrid

import "os"

func maxRSS(*os.ProcessState) int64 { return 0 }
