package bootstrap

import (
	"fmt"
	"os"
	"strconv"
)

// launcherVars lists, in order of preference, the environment variable pairs (rank, size) that
// common launchers set for every process they start: Open MPI's mpirun, MPICH/Hydra and Intel MPI
// (PMI), and Slurm's srun.
var launcherVars = [][2]string{
	{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
	{"PMI_RANK", "PMI_SIZE"},
	{"SLURM_PROCID", "SLURM_NTASKS"},
}

// World is the position of this process in a multi-process run.
type World struct {
	Rank   int    // this process's rank, 0 <= Rank < Size
	Size   int    // number of processes (ranks)
	Source string // where Rank and Size came from: "flags" or the launcher's variable names
}

// MaxSize is the largest world: no plan has more ranks (elaborate.MaxRanks), and rank 0 keeps a
// connection per rank.
const MaxSize = 1 << 16

// ResolveWorld decides this process's rank and the world size. Explicit values (from the
// command-line flags --rank and --ranks) win; -1 means "not given", and other negative values are
// refused. Whatever is missing is taken from the first launcher whose variables are set
// (OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/PMI_SIZE, SLURM_PROCID/SLURM_NTASKS). Errors name the
// offending value and where it came from. getenv is os.Getenv when nil; tests pass their own.
func ResolveWorld(rank, size int, getenv func(string) string) (World, error) {
	return resolve(rank, size, getenv, true)
}

// FromLauncher is ResolveWorld for a caller that has no way to set the rank and size itself (the
// library): both come from the launcher's variables, and its errors name no flags.
func FromLauncher(getenv func(string) string) (World, error) {
	return resolve(-1, -1, getenv, false)
}

// Launched reports whether a launcher set any of its variables for this process (getenv is
// os.Getenv when nil): then a rank or size FromLauncher cannot read is an error, not "no
// launcher".
func Launched(getenv func(string) string) bool {
	if getenv == nil {
		getenv = os.Getenv
	}
	for _, pair := range launcherVars {
		if getenv(pair[0]) != "" || getenv(pair[1]) != "" {
			return true
		}
	}
	return false
}

// resolve is ResolveWorld; flags says whether the caller has the flags its hints name.
func resolve(rank, size int, getenv func(string) string, flags bool) (World, error) {
	// or is hint when the caller has the flags, else nothing.
	or := func(hint string) string {
		if !flags {
			return ""
		}
		return hint
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	switch {
	case rank < -1:
		return World{}, fmt.Errorf("--rank %d is negative: ranks count from 0 (leave --rank out to take it from mpirun or srun)", rank)
	case size < -1 || size == 0:
		return World{}, fmt.Errorf("--ranks %d: a run needs at least 1 process (leave --ranks out to take it from mpirun or srun)", size)
	}
	w := World{Rank: rank, Size: size, Source: "flags"}
	if rank < 0 || size < 0 {
		for _, pair := range launcherVars {
			rs, ss := getenv(pair[0]), getenv(pair[1])
			if rs == "" && ss == "" {
				continue
			}
			if rs == "" || ss == "" {
				return World{}, fmt.Errorf("launcher environment is incomplete: %s=%q but %s=%q (set both%s)",
					pair[0], rs, pair[1], ss, or(", or pass --rank and --ranks"))
			}
			r, err := strconv.Atoi(rs)
			if err != nil {
				return World{}, fmt.Errorf("launcher variable %s=%q is not an integer rank", pair[0], rs)
			}
			s, err := strconv.Atoi(ss)
			if err != nil {
				return World{}, fmt.Errorf("launcher variable %s=%q is not an integer process count", pair[1], ss)
			}
			if r < 0 && rank < 0 {
				return World{}, fmt.Errorf("launcher variable %s=%d is a negative rank: ranks count from 0%s", pair[0], r, or(" (or pass --rank)"))
			}
			if s < 1 && size < 0 {
				return World{}, fmt.Errorf("launcher variable %s=%d: a run needs at least 1 process%s", pair[1], s, or(" (or pass --ranks)"))
			}
			src := pair[0] + "/" + pair[1]
			if rank < 0 {
				w.Rank = r
				w.Source = src
			}
			if size < 0 {
				w.Size = s
				w.Source = src
			}
			if rank >= 0 || size >= 0 {
				w.Source = "flags and " + src
			}
			break
		}
	}
	how := or("pass --rank R --ranks N, or ") + "start the processes with mpirun or srun (which set OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/PMI_SIZE or SLURM_PROCID/SLURM_NTASKS)"
	switch {
	case w.Rank < 0 && w.Size < 0:
		return World{}, fmt.Errorf("rank and world size are unknown: %s", how)
	case w.Rank < 0:
		return World{}, fmt.Errorf("this process's rank is unknown (--ranks %d was given): %s", w.Size, how)
	case w.Size < 0:
		return World{}, fmt.Errorf("the world size is unknown (--rank %d was given): %s", w.Rank, how)
	}
	if w.Size > MaxSize {
		return World{}, fmt.Errorf("%d ranks (from %s) are more than any plan has: a world has at most %d", w.Size, w.Source, MaxSize)
	}
	if w.Rank >= w.Size {
		return World{}, fmt.Errorf("rank %d (from %s) is out of range for %d ranks: ranks are 0..%d", w.Rank, w.Source, w.Size, w.Size-1)
	}
	return w, nil
}
