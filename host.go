package coredag

import (
	"crypto/sha256"
	"os"
)

// hostID names where this process's network lives: the kernel's boot (a host) and the network
// namespace (a container may have its own loopback). Two processes whose ids differ cannot
// reach each other's 127.0.0.1. Where the boot's id cannot be read, the host's name stands in.
func hostID() [8]byte {
	where := "boot "
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
		where += string(b)
	} else if name, err := os.Hostname(); err == nil {
		where = "host " + name
	}
	if ns, err := os.Readlink("/proc/self/ns/net"); err == nil { // net:[INODE]
		where += " " + ns
	}
	sum := sha256.Sum256([]byte(where))
	return [8]byte(sum[:8])
}
