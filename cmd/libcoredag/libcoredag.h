/* libcoredag.h: the handles behind coredag.h's opaque types, shared by the Go exports (main.go)
 * and the C entry points (coredag.c). Not installed. */
#ifndef LIBCOREDAG_H
#define LIBCOREDAG_H

#include <stdint.h>
#include "coredag.h"

/* A handle holds no Go pointer: handle is a runtime/cgo.Handle (0 in a handle that only carries an
 * error), err the last error's message (malloc'd, freed with the handle). */
struct coredag_plan {
    uintptr_t handle;
    char *err;
    char *name; /* the plan's name (malloc'd when it opens), NULL before */
};

struct coredag_coll {
    uintptr_t handle;
    char *err;
    coredag_world world; /* the caller's world, copied at init (rank -1: none) */
};

/* Trampolines: Go calls the caller's world through these. */
int cdg_world_allgather(const coredag_world *w, const void *send, void *recv, size_t nbytes);
int cdg_world_barrier(const coredag_world *w);

#endif
