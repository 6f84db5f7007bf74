package bootstrap

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/coredag/coredag/internal/boundedio"
)

// The job secret. Every rank of a job holds the same secret; the handshake (wire.go) proves in
// both directions that the other side holds it too, so a process of another user on the same
// machine can neither join a run nor pose as its rank 0. The secret itself never crosses the wire:
// each side sends an HMAC-SHA256 over both sides' fresh nonces, under a label that differs by
// direction so that one side's proof cannot be reflected as the other's.

// SecretEnv names the environment variable that holds the job secret.
const SecretEnv = "COREDAG_JOB_SECRET"

// MinSecretLen is the shortest secret accepted, in bytes. A proof is an HMAC that anyone who
// connects to rank 0 can obtain and test guesses against offline, so the secret must be too long
// to guess: 16 random bytes, or a longer passphrase.
const MinSecretLen = 16

// maxSecretFile bounds what a secret file may hold.
const maxSecretFile = 4 << 10

// ompiJobKey is the variable in which Open MPI's mpirun hands every process of a job the same
// 128-bit key it reads from /dev/urandom ("%016x-%016x"), meant for transports that need a job key.
// It is in the processes' environment only, which other users cannot read.
const ompiJobKey = "OMPI_MCA_orte_precondition_transports"

const (
	nonceLen  = 32
	macLen    = sha256.Size
	rootLabel = "coredag-bootstrap/2 rank 0 proves the job secret\x00"
	rankLabel = "coredag-bootstrap/2 rank proves the job secret\x00"
)

// ResolveSecret finds the job secret: the contents of file when it is not empty, else the
// environment variable COREDAG_JOB_SECRET, else the job key of an Open MPI mpirun. It returns
// the secret and where it came from, or a nil secret when there is none. getenv is os.Getenv
// when nil.
//
// The file must be a regular file owned by the user running coredag that no one else may read or
// write (mode 600 or 400). The secret is never taken from a command-line argument, which every
// user of the machine can see with ps.
//
// Launchers that set no secret of their own are not used: Slurm's job and step ids, PMIx's
// namespace and Open MPI's job id are known to every user who can run squeue or ps, so they
// prove nothing. Open MPI's key is used only when both its halves are large: under direct launch
// (srun) Open MPI builds it from the job id instead of random bytes.
func ResolveSecret(file string, getenv func(string) string) ([]byte, string, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if file != "" {
		b, err := readSecretFile(file)
		if err != nil {
			return nil, "", err
		}
		return b, "file " + file, checkSecret(b, "job secret file "+file)
	}
	if s := getenv(SecretEnv); s != "" {
		return []byte(s), SecretEnv, checkSecret([]byte(s), SecretEnv)
	}
	if s := getenv(ompiJobKey); randomOMPIKey(s) {
		return []byte(s), "Open MPI's job key (" + ompiJobKey + ")", nil
	}
	return nil, "", nil
}

// NoSecretHelp says how to give a job a secret, for messages that refuse a run without one.
const NoSecretHelp = "generate one per job and give it to every rank, e.g. export " + SecretEnv +
	"=$(head -c 32 /dev/urandom | base64) before starting them (mpirun -x " + SecretEnv +
	" passes it to other nodes, srun passes the environment on)"

func checkSecret(b []byte, from string) error {
	if len(b) < MinSecretLen {
		return fmt.Errorf("%s holds %d bytes: a job secret needs at least %d, e.g. $(head -c 32 /dev/urandom | base64)", from, len(b), MinSecretLen)
	}
	return nil
}

// randomOMPIKey reports whether s is an Open MPI job key that was drawn at random: two 64-bit
// hex halves, each at least 2^32. A key built from job and step ids has small halves (the odds of a
// random half below 2^32 are 2^-32).
func randomOMPIKey(s string) bool {
	a, b, ok := strings.Cut(s, "-")
	if !ok || len(a) != 16 || len(b) != 16 {
		return false
	}
	for _, h := range []string{a, b} {
		v, err := strconv.ParseUint(h, 16, 64)
		if err != nil || v < 1<<32 {
			return false
		}
	}
	return true
}

// readSecretFile reads a secret file after checking, on the opened file, that only its owner,
// the user running coredag, may read it. A trailing newline is not part of the secret.
func readSecretFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("job secret file: %v", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("job secret file: %v", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("job secret file %s is not a regular file (%v)", path, fi.Mode().Type())
	}
	if uid, ok := fileOwner(fi); !ok || uid != os.Getuid() {
		return nil, fmt.Errorf("job secret file %s is owned by uid %d, not by you (uid %d): use a file of your own", path, uid, os.Getuid())
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("job secret file %s has mode %04o: other users may read or change it; chmod 600 %s", path, perm, path)
	}
	b, err := boundedio.ReadAll(f, maxSecretFile)
	var big *boundedio.TooLargeError
	switch {
	case errors.As(err, &big):
		return nil, fmt.Errorf("job secret file %s is larger than %d bytes: a job secret is a short key", path, big.Limit)
	case err != nil:
		return nil, fmt.Errorf("job secret file: %v", err)
	}
	b = []byte(strings.TrimRight(string(b), "\r\n"))
	return b, nil
}

// newNonce returns fresh random bytes for one handshake.
func newNonce() ([]byte, error) {
	b := make([]byte, nonceLen)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("bootstrap: no randomness for the handshake: %v", err)
	}
	return b, nil
}

// proof is HMAC-SHA256(secret, label | parts...). The nonces have a fixed length and only the
// last part varies, so the concatenation is unambiguous.
func proof(secret []byte, label string, parts ...[]byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(label))
	for _, p := range parts {
		h.Write(p)
	}
	return h.Sum(nil)
}

// errNotJob is why rank 0 drops a connection whose peer did not prove the job secret.
var errNotJob = errors.New("it did not prove it knows the job secret")
