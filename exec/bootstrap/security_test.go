package bootstrap

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startRoot runs rank 0 in the background: Connect, then a Barrier; wait returns the outcome.
func startRoot(t *testing.T, c Config) (wait func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		comm, err := Connect(context.Background(), c)
		if err == nil {
			err = comm.Barrier(context.Background())
			comm.Close()
		}
		done <- err
	}()
	return func() error {
		select {
		case err := <-done:
			return err
		case <-time.After(time.Minute):
			t.Fatal("rank 0 did not return within a minute")
			return nil
		}
	}
}

// dialRoot connects to rank 0 at addr as a stranger would, once it listens.
func dialRoot(t *testing.T, addr string) net.Conn {
	t.Helper()
	var conn net.Conn
	require.Eventually(t, func() bool {
		var err error
		conn, err = net.Dial("tcp", addr)
		return err == nil
	}, 5*time.Second, 10*time.Millisecond)
	t.Cleanup(func() { conn.Close() })
	return conn
}

// oldHello is the hello of the first bootstrap protocol, which anyone could send: "I am rank r
// of size".
func oldHello(r, size int) []byte {
	b := append([]byte(magic), 0, 1)
	b = binary.BigEndian.AppendUint32(b, uint32(r))
	b = binary.BigEndian.AppendUint32(b, uint32(size))
	return append([]byte{byte(kindHello), 0, 0, 0, byte(len(b))}, b...)
}

// logged collects what rank 0 reports through Config.Logf.
type logged struct {
	mu    sync.Mutex
	lines []string
}

func (l *logged) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logged) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// TestStrangersDoNotDisturb: connections from processes without the job secret, made before the
// real rank 1 connects, neither hold up the job, nor join it, nor end it. Rank 0 reports a few.
func TestStrangersDoNotDisturb(t *testing.T) {
	strangers := map[string]func(conn net.Conn){
		"silent":             func(net.Conn) {},
		"http":               func(conn net.Conn) { conn.Write([]byte("GET / HTTP/1.0\r\n\r\n")) },
		"claims rank 1 of 3": func(conn net.Conn) { conn.Write(oldHello(1, 3)) },
		"claims rank 1 of 2": func(conn net.Conn) { conn.Write(oldHello(1, 2)) },
		"huge frame":         func(conn net.Conn) { conn.Write([]byte{byte(kindHello), 0xff, 0xff, 0xff, 0xff}) },
		"half a hello":       func(conn net.Conn) { conn.Write(encodeHello(make([]byte, nonceLen))[:10]) },
		"hello, no proof": func(conn net.Conn) {
			writeFrame(conn, kindHello, encodeHello(make([]byte, nonceLen)))
		},
		"bad proof": func(conn net.Conn) {
			writeFrame(conn, kindHello, encodeHello(make([]byte, nonceLen)))
			readFrame(conn)
			body := member{rank: 1, size: 2}.encode()
			writeFrame(conn, kindProof, append(make([]byte, macLen), body...))
		},
	}
	for name, act := range strangers {
		t.Run(name, func(t *testing.T) {
			addr := freeAddr(t)
			var log logged
			root := cfg(addr, 0, 2, 20*time.Second)
			root.Logf = log.logf
			wait := startRoot(t, root)
			stranger := dialRoot(t, addr)
			act(stranger)
			// The stranger's bytes reach rank 0 before the real rank connects.
			time.Sleep(50 * time.Millisecond)
			start := time.Now()
			require.NoError(t, joinRoot(t, addr, wait))
			assert.Less(t, time.Since(start), helloTimeout/2, "rank 1 waited for the stranger")
			for _, l := range log.all() {
				assert.Regexp(t, `^bootstrap: rank 0 dropped a connection from 127\.0\.0\.1:\d+: `, l)
			}
		})
	}
}

// TestManyStrangers: more silent connections than rank 0 handshakes at once do not keep the job
// from joining (the real rank's connection ends the oldest handshake instead of waiting for a
// silent one to time out), and rank 0 reports only a few of them.
func TestManyStrangers(t *testing.T) {
	addr := freeAddr(t)
	var log logged
	root := cfg(addr, 0, 2, 20*time.Second)
	root.Logf = log.logf
	wait := startRoot(t, root)
	dialRoot(t, addr)
	for range maxPending + 10 {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer conn.Close()
	}
	time.Sleep(50 * time.Millisecond) // rank 0 has accepted them all
	start := time.Now()
	require.NoError(t, joinRoot(t, addr, wait))
	assert.Less(t, time.Since(start), helloTimeout/2, "rank 1 waited for the silent ones")
	assert.LessOrEqual(t, len(log.all()), maxLogged)
}

// TestWrongSecret: a rank with another secret (another user's process claiming rank 1, started
// first) learns that it did not reach its job's rank 0 and gives rank 0 nothing; the real rank 1
// joins.
func TestWrongSecret(t *testing.T) {
	addr := freeAddr(t)
	wait := startRoot(t, cfg(addr, 0, 2, 20*time.Second))
	dialRoot(t, addr).Close()
	impostor := cfg(addr, 1, 2, 5*time.Second)
	impostor.Secret = []byte("not the job's secret, but long enough")
	_, err := Connect(context.Background(), impostor)
	require.ErrorContains(t, err, "is not this job's rank 0: it does not know the job secret")
	require.NoError(t, joinRoot(t, addr, wait))
}

// joinRoot runs the real rank 1 of a 2-rank job against the rank 0 that wait waits for: Connect
// and a Barrier. It returns the first error of either rank.
func joinRoot(t *testing.T, addr string, wait func() error) error {
	t.Helper()
	c, err := Connect(context.Background(), cfg(addr, 1, 2, 20*time.Second))
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Barrier(context.Background()); err != nil {
		return err
	}
	return wait()
}

// TestRootImpostor: a process that took the port before rank 0 and does not know the secret is
// found out by the dialling rank, which tells it nothing about itself, whether it speaks the
// handshake or the first protocol.
func TestRootImpostor(t *testing.T) {
	t.Run("handshake", func(t *testing.T) {
		addr := freeAddr(t)
		fake := cfg(addr, 0, 2, 2*time.Second)
		fake.Secret = []byte("another user's secret, 32 bytes!")
		wait := startRoot(t, fake)
		dialRoot(t, addr).Close()
		_, err := Connect(context.Background(), cfg(addr, 1, 2, 5*time.Second))
		require.ErrorContains(t, err, "bootstrap: rank 1: the process listening on "+addr+" is not this job's rank 0: it does not know the job secret")
		// The impostor got no proof: to it, rank 1 never joined.
		require.ErrorContains(t, wait(), "rank 1 never connected")
	})
	t.Run("first protocol", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer ln.Close()
		got := make(chan []byte, 1)
		go func() {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
			_, p, _ := readFrame(conn)
			writeFrame(conn, kindWelcome, nil) // the old rank 0's answer
			rest := make([]byte, 1024)
			n, _ := conn.Read(rest)
			got <- append(p, rest[:n]...)
		}()
		_, err = Connect(context.Background(), cfg(ln.Addr().String(), 1, 2, 5*time.Second))
		require.ErrorContains(t, err, "unexpected welcome from "+ln.Addr().String())
		b := <-got
		assert.NotContains(t, string(b), string(testSecret))
	})
}

// TestJobMismatch: ranks started with different parameters or iteration counts are refused at
// once, both of them, with the difference named; a rank that had joined is told why.
func TestJobMismatch(t *testing.T) {
	job := func(n, iters string) []Fact {
		return []Fact{{"plan", "plan ring sha256:abcd"}, {"param n", "n=" + n}, {"iters", "--iters " + iters}}
	}
	addr := freeAddr(t)
	root := cfg(addr, 0, 3, 30*time.Second)
	root.Job = job("1024", "3")
	start := time.Now()
	wait := startRoot(t, root)
	dialRoot(t, addr).Close()
	r1 := cfg(addr, 1, 3, 30*time.Second)
	r1.Job = job("1024", "3")
	r2 := cfg(addr, 2, 3, 30*time.Second)
	r2.Job = job("2048", "5")
	var err1, err2 error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, err1 = Connect(context.Background(), r1)
	}()
	time.Sleep(time.Second) // rank 1 joins first
	_, err2 = Connect(context.Background(), r2)
	wg.Wait()
	rootErr := wait()
	want := "rank 2 runs n=2048, rank 0 n=1024; rank 2 runs --iters 5, rank 0 --iters 3"
	require.ErrorContains(t, rootErr, "bootstrap: rank 2 does not run the same job as rank 0: "+want)
	require.ErrorContains(t, err2, "bootstrap: rank 0 refused rank 2: rank 2 does not run the same job as rank 0: "+want)
	require.ErrorContains(t, err1, "bootstrap: rank 0 ended the bootstrap: rank 2 does not run the same job")
	assert.Less(t, time.Since(start), 10*time.Second)
}

func TestJobDiff(t *testing.T) {
	ours := []Fact{{"plan", "plan a"}, {"param n", "n=1"}}
	assert.Equal(t, "", jobDiff(1, ours, ours))
	assert.Equal(t, "rank 0 runs n=1, rank 1 has no param n; rank 1 runs m=2, rank 0 has no param m",
		jobDiff(1, []Fact{{"plan", "plan a"}, {"param m", "m=2"}}, ours))
}

// TestMissingRank: a 3-rank job in which rank 1 joined names only rank 2 as missing, on rank 0
// and on rank 1.
func TestMissingRank(t *testing.T) {
	addr := freeAddr(t)
	wait := startRoot(t, cfg(addr, 0, 3, 2*time.Second))
	_, err1 := Connect(context.Background(), cfg(addr, 1, 3, 10*time.Second))
	rootErr := wait()
	require.Error(t, rootErr)
	assert.Contains(t, rootErr.Error(), "but rank 2 never connected")
	assert.NotContains(t, rootErr.Error(), "ranks 1")
	require.ErrorContains(t, err1, "rank 0 ended the bootstrap: rank 0 waited 2s on "+addr+" but rank 2 never connected")
}

// TestDuplicateRank: a second process claiming a rank that has joined is refused, and the job
// goes on with the first.
func TestDuplicateRank(t *testing.T) {
	addr := freeAddr(t)
	wait := startRoot(t, cfg(addr, 0, 3, 20*time.Second))
	dialRoot(t, addr).Close()
	// Two processes claim rank 1. Neither can finish before rank 2 joins, so whichever the
	// root saw second is refused first, whatever order the scheduler ran them in.
	results := make(chan error, 2)
	for range 2 {
		go func() {
			c, err := Connect(context.Background(), cfg(addr, 1, 3, 20*time.Second))
			if err == nil {
				err = c.Barrier(context.Background())
				c.Close()
			}
			results <- err
		}()
	}
	errDup := <-results
	require.ErrorContains(t, errDup, "rank 1 has joined already: two processes were given the same rank")
	c2, err := Connect(context.Background(), cfg(addr, 2, 3, 20*time.Second))
	require.NoError(t, err)
	require.NoError(t, c2.Barrier(context.Background()))
	c2.Close()
	require.NoError(t, <-results)
	require.NoError(t, wait())
}

func TestConnectRefuses(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		err  string
	}{
		{"port 0", cfg("127.0.0.1:0", 0, 2, time.Minute), "bootstrap address 127.0.0.1:0 has port 0: rank 0 would listen on a port the system picks"},
		{"port 0 dialling", cfg("127.0.0.1:0", 1, 2, time.Minute), "has port 0"},
		{"no port", cfg("127.0.0.1", 0, 2, time.Minute), `bootstrap address "127.0.0.1": address 127.0.0.1: missing port in address`},
		{"no secret", Config{World: World{Rank: 1, Size: 2}, Addr: "127.0.0.1:1"}, "2 ranks need a job secret that every rank holds and other users cannot read (Config.Secret): generate one per job"},
		{"short secret", Config{World: World{Rank: 0, Size: 2}, Addr: "127.0.0.1:1", Secret: []byte("1234")}, "the job secret holds 4 bytes: a job secret needs at least 16"},
		{"negative size", Config{World: World{Rank: 0, Size: -2}, Addr: "127.0.0.1:1"}, "rank 0 of -2 ranks is not a valid position"},
		{"huge job", Config{World: World{Rank: 0, Size: 2}, Addr: "127.0.0.1:1", Secret: testSecret, Job: []Fact{{"x", strings.Repeat("x", maxHandshake)}}}, "more than the"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			_, err := Connect(context.Background(), tt.cfg)
			require.ErrorContains(t, err, tt.err)
			assert.Less(t, time.Since(start), time.Second, "refused at once")
		})
	}
}

func TestResolveSecret(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		require.NoError(t, os.Chmod(p, mode))
		return p
	}
	good := write("good", "file-secret-0123456789\n", 0o600)
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	const ompiRandom = "11b3320079e33008-f3fcde046aadce72"
	all := env(map[string]string{SecretEnv: "env-secret-0123456789", ompiJobKey: ompiRandom})

	s, src, err := ResolveSecret(good, all)
	require.NoError(t, err)
	assert.Equal(t, "file-secret-0123456789", string(s))
	assert.Equal(t, "file "+good, src)

	s, src, err = ResolveSecret("", all)
	require.NoError(t, err)
	assert.Equal(t, "env-secret-0123456789", string(s))
	assert.Equal(t, SecretEnv, src)

	s, _, err = ResolveSecret("", env(map[string]string{ompiJobKey: ompiRandom}))
	require.NoError(t, err)
	assert.Equal(t, ompiRandom, string(s))

	// A key made of a job id and a step id is known to other users: it is no secret.
	for _, k := range []string{"0000000000003a2b-0000000000000001", "garbage", ""} {
		s, _, err = ResolveSecret("", env(map[string]string{ompiJobKey: k, "SLURM_JOB_ID": "123", "PMIX_ID": "938344449.1"}))
		require.NoError(t, err)
		assert.Nil(t, s, k)
	}

	for _, tt := range []struct {
		path, err string
	}{
		{write("group", "file-secret-0123456789", 0o640), "has mode 0640: other users may read or change it; chmod 600 "},
		{write("world", "file-secret-0123456789", 0o604), "has mode 0604"},
		{write("short", "abc\n", 0o600), "holds 3 bytes: a job secret needs at least 16"},
		{write("big", strings.Repeat("x", maxSecretFile+1), 0o400), "is larger than 4096 bytes"},
		{dir, "is not a regular file"},
		{filepath.Join(dir, "none"), "no such file"},
	} {
		_, _, err := ResolveSecret(tt.path, all)
		require.ErrorContains(t, err, tt.err, tt.path)
	}
	_, _, err = ResolveSecret("", env(map[string]string{SecretEnv: "short"}))
	require.ErrorContains(t, err, "COREDAG_JOB_SECRET holds 5 bytes")
}
