//go:build linux && cgo

package main

// glibc gives every thread that calls malloc an arena of its own, up to 8 per core, and reserves
// 64 MB of address space for each. The binary is linked with cgo (net, os/user), so the Go
// runtime's threads are glibc threads, and each arena they touch counts against `ulimit -v`: on
// a login node limited to 1 GiB, start-up failed about one time in twenty with "fatal error:
// out of memory" while a few MB were in use. coredag's own memory comes from the Go allocator;
// one malloc arena is plenty for what C code it calls (libibverbs with -tags verbs). The
// constructor runs when the process starts, before any thread exists.

/*
#include <malloc.h>

__attribute__((constructor)) static void coredag_one_malloc_arena(void) {
#ifdef M_ARENA_MAX
	mallopt(M_ARENA_MAX, 1);
#endif
}
*/
import "C"
