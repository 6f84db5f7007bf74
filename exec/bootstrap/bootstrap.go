// Package bootstrap connects the processes of a multi-process coredag run over TCP before any RDMA
// traffic flows, and carries the small exchanges a run needs: queue pair numbers, GIDs, PSNs,
// buffer addresses and rkeys before the run, every rank's verdict after it.
//
// Rank 0 listens on the bootstrap address; every other rank connects to it (retrying until rank 0
// is up) and says which rank it is. The topology is a star: collectives go through rank 0, which is
// plenty for the few kilobytes exchanged once per run. Every wait is bounded by a timeout, and an
// expired wait names the rank that did not answer.
//
// Rank and world size come from flags or from the environment of the usual launchers (see
// ResolveWorld), so the same command line works under mpirun and srun.
package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// DefaultTimeout bounds each bootstrap wait when Config.Timeout is zero: connecting all ranks, and
// each collective afterwards.
const DefaultTimeout = 60 * time.Second

// Config says how to reach the other ranks.
type Config struct {
	World
	// Addr is HOST:PORT. Rank 0 listens on it (HOST may be empty or 0.0.0.0 to listen on all
	// interfaces); the other ranks connect to it, so there HOST must name rank 0's machine.
	Addr string
	// Timeout bounds each wait (DefaultTimeout when zero).
	Timeout time.Duration
}

// Comm is a connected group of ranks. Its collectives must be called by every rank in the same
// order, like MPI's. A Comm is not safe for concurrent use.
type Comm struct {
	world   World
	addr    string
	timeout time.Duration
	peers   []net.Conn // on rank 0: peers[r] is rank r's connection (peers[0] is nil)
	root    net.Conn   // on other ranks: the connection to rank 0
	early   [][]byte   // on rank 0: reports that arrived during a collective, by rank
}

// Rank returns this process's rank.
func (c *Comm) Rank() int { return c.world.Rank }

// Size returns the number of ranks.
func (c *Comm) Size() int { return c.world.Size }

// Connect joins the group described by cfg: rank 0 waits until every other rank has connected,
// the others connect to rank 0. It returns when all ranks are connected, or with an error naming
// the ranks that were missing when the timeout or ctx expired.
func Connect(ctx context.Context, cfg Config) (*Comm, error) {
	if cfg.Size < 1 || cfg.Rank < 0 || cfg.Rank >= cfg.Size {
		return nil, fmt.Errorf("bootstrap: rank %d of %d ranks is not a valid position (need 0 <= rank < ranks)", cfg.Rank, cfg.Size)
	}
	c := &Comm{world: cfg.World, addr: cfg.Addr, timeout: cfg.Timeout}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if cfg.Size == 1 {
		return c, nil
	}
	if cfg.Addr == "" {
		return nil, fmt.Errorf("bootstrap: %d ranks need a bootstrap address: pass --bootstrap HOST:PORT (rank 0's host and a free TCP port)", cfg.Size)
	}
	if cfg.Rank == 0 {
		return c, c.accept(ctx)
	}
	return c, c.dial(ctx)
}

// deadline is the earlier of ctx's deadline and now + the per-wait timeout.
func (c *Comm) deadline(ctx context.Context) time.Time {
	d := time.Now().Add(c.timeout)
	if cd, ok := ctx.Deadline(); ok && cd.Before(d) {
		d = cd
	}
	return d
}

// accept runs on rank 0: listen, then take one connection from each other rank.
func (c *Comm) accept(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", c.addr)
	if err != nil {
		return fmt.Errorf("bootstrap: rank 0 cannot listen on %s: %v (pick a free port, and a HOST that is an address of this machine)", c.addr, err)
	}
	defer ln.Close()
	tl := ln.(*net.TCPListener)
	deadline := c.deadline(ctx)
	stop := context.AfterFunc(ctx, func() { tl.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if err := tl.SetDeadline(deadline); err != nil {
		return fmt.Errorf("bootstrap: %v", err)
	}
	c.peers = make([]net.Conn, c.world.Size)
	joined := 1
	for joined < c.world.Size {
		conn, err := tl.Accept()
		if err != nil {
			c.closePeers()
			if ctx.Err() != nil {
				return fmt.Errorf("bootstrap: rank 0 stopped waiting for ranks %s: %v", c.missing(), ctx.Err())
			}
			if isTimeout(err) {
				return fmt.Errorf("bootstrap: rank 0 waited %v on %s but ranks %s never connected (are they running, with --bootstrap pointing at this host, and --ranks %d?)",
					c.timeout.Round(time.Second), c.addr, c.missing(), c.world.Size)
			}
			return fmt.Errorf("bootstrap: rank 0 accepting on %s: %v", c.addr, err)
		}
		r, err := c.welcome(conn, deadline)
		if err != nil {
			// A bad hello (a stray client, a rank started with other flags) is refused and
			// reported, but does not stop the others from joining.
			conn.Close()
			if r < 0 {
				continue
			}
			c.closePeers()
			return err
		}
		c.peers[r] = conn
		joined++
	}
	return nil
}

// welcome reads a hello on rank 0 and answers it. It returns the rank, or an error with rank -1
// for a connection that is not a coredag rank (ignored) and rank >= 0 for a fatal mismatch.
func (c *Comm) welcome(conn net.Conn, deadline time.Time) (int, error) {
	conn.SetDeadline(deadline)
	kind, payload, err := readFrame(conn)
	if err != nil || kind != kindHello {
		return -1, errors.New("not a coredag rank")
	}
	h, err := decodeHello(payload)
	if err != nil {
		writeFrame(conn, kindReject, []byte(err.Error()))
		return -1, err
	}
	var reason string
	switch {
	case h.size != c.world.Size:
		reason = fmt.Sprintf("rank %d says there are %d ranks, rank 0 says %d: start every rank with the same --ranks", h.rank, h.size, c.world.Size)
	case h.rank <= 0 || h.rank >= c.world.Size:
		reason = fmt.Sprintf("rank %d is out of range 1..%d", h.rank, c.world.Size-1)
	case c.peers[h.rank] != nil:
		reason = fmt.Sprintf("rank %d connected twice: two processes were started with the same --rank", h.rank)
	}
	if reason != "" {
		writeFrame(conn, kindReject, []byte(reason))
		return 0, fmt.Errorf("bootstrap: %s", reason)
	}
	if err := writeFrame(conn, kindWelcome, nil); err != nil {
		return 0, fmt.Errorf("bootstrap: answering rank %d: %v", h.rank, err)
	}
	return h.rank, nil
}

// missing lists the ranks rank 0 has not heard from, e.g. "1, 3".
func (c *Comm) missing() string {
	var m []string
	for r := 1; r < c.world.Size; r++ {
		if c.peers == nil || c.peers[r] == nil {
			m = append(m, fmt.Sprint(r))
		}
	}
	return strings.Join(m, ", ")
}

func (c *Comm) closePeers() {
	for i, p := range c.peers {
		if p != nil {
			p.Close()
			c.peers[i] = nil
		}
	}
}

// retryDelay is the pause between attempts to reach rank 0 while it is not listening yet.
const retryDelay = 100 * time.Millisecond

// dial runs on ranks other than 0: connect to rank 0, retrying until it listens, then say hello.
func (c *Comm) dial(ctx context.Context) error {
	deadline := c.deadline(ctx)
	var last error
	for {
		d := net.Dialer{Deadline: deadline}
		conn, err := d.DialContext(ctx, "tcp", c.addr)
		if err == nil {
			conn.SetDeadline(deadline)
			if err := c.hello(conn); err != nil {
				conn.Close()
				return err
			}
			c.root = conn
			return nil
		}
		last = err
		if ctx.Err() != nil {
			return fmt.Errorf("bootstrap: rank %d stopped trying to reach rank 0 at %s: %v (last error: %v)", c.world.Rank, c.addr, ctx.Err(), last)
		}
		if time.Until(deadline) < retryDelay {
			return fmt.Errorf("bootstrap: rank %d could not reach rank 0 at %s within %v: %v (is rank 0 running and listening there?)",
				c.world.Rank, c.addr, c.timeout.Round(time.Second), last)
		}
		select {
		case <-ctx.Done():
		case <-time.After(retryDelay):
		}
	}
}

func (c *Comm) hello(conn net.Conn) error {
	if err := writeFrame(conn, kindHello, hello{rank: c.world.Rank, size: c.world.Size}.encode()); err != nil {
		return fmt.Errorf("bootstrap: rank %d greeting rank 0 at %s: %v", c.world.Rank, c.addr, err)
	}
	kind, payload, err := readFrame(conn)
	switch {
	case err != nil && isTimeout(err):
		return fmt.Errorf("bootstrap: rank %d: rank 0 at %s accepted the connection but did not answer within %v", c.world.Rank, c.addr, c.timeout.Round(time.Second))
	case err != nil:
		return fmt.Errorf("bootstrap: rank %d: rank 0 at %s closed the connection: %v (is something else listening on that port?)", c.world.Rank, c.addr, err)
	case kind == kindReject:
		return fmt.Errorf("bootstrap: rank 0 refused rank %d: %s", c.world.Rank, payload)
	case kind != kindWelcome:
		return fmt.Errorf("bootstrap: rank %d: unexpected %v from %s (is it a coredag rank 0?)", c.world.Rank, kind, c.addr)
	}
	return nil
}

// Close ends the connections. Call it on every rank once the last collective has returned.
func (c *Comm) Close() error {
	c.closePeers()
	if c.root != nil {
		err := c.root.Close()
		c.root = nil
		return err
	}
	return nil
}

// Gather collects every rank's data on rank 0: there it returns data indexed by rank; on the
// other ranks it returns nil once rank 0 has the data.
func (c *Comm) Gather(ctx context.Context, data []byte) ([][]byte, error) {
	if c.world.Rank != 0 {
		return nil, c.send(ctx, c.root, 0, kindGather, data)
	}
	return c.collect(ctx, kindGather, data)
}

// AllGather gives every rank every rank's data, indexed by rank.
func (c *Comm) AllGather(ctx context.Context, data []byte) ([][]byte, error) {
	if c.world.Rank != 0 {
		if err := c.send(ctx, c.root, 0, kindAllGather, data); err != nil {
			return nil, err
		}
		all, err := c.recv(ctx, c.root, 0, kindAllGather)
		if err != nil {
			return nil, err
		}
		return splitAll(all, c.world.Size)
	}
	all, err := c.collect(ctx, kindAllGather, data)
	if err != nil {
		return nil, err
	}
	joined := joinAll(all)
	for r := 1; r < c.world.Size; r++ {
		if err := c.send(ctx, c.peers[r], r, kindAllGather, joined); err != nil {
			return nil, err
		}
	}
	return all, nil
}

// Broadcast returns rank 0's data on every rank (data is ignored on the other ranks).
func (c *Comm) Broadcast(ctx context.Context, data []byte) ([]byte, error) {
	if c.world.Rank != 0 {
		return c.recv(ctx, c.root, 0, kindBroadcast)
	}
	for r := 1; r < c.world.Size; r++ {
		if err := c.send(ctx, c.peers[r], r, kindBroadcast, data); err != nil {
			return nil, err
		}
	}
	return data, nil
}

// Barrier returns once every rank has called it.
func (c *Comm) Barrier(ctx context.Context) error {
	if c.world.Rank != 0 {
		if err := c.send(ctx, c.root, 0, kindBarrier, nil); err != nil {
			return err
		}
		_, err := c.recv(ctx, c.root, 0, kindBarrier)
		return err
	}
	if _, err := c.collect(ctx, kindBarrier, nil); err != nil {
		return err
	}
	for r := 1; r < c.world.Size; r++ {
		if err := c.send(ctx, c.peers[r], r, kindBarrier, nil); err != nil {
			return err
		}
	}
	return nil
}

// collect runs on rank 0: read one frame of the given kind from every other rank.
func (c *Comm) collect(ctx context.Context, kind frameKind, own []byte) ([][]byte, error) {
	all := make([][]byte, c.world.Size)
	all[0] = own
	for r := 1; r < c.world.Size; r++ {
		b, err := c.recv(ctx, c.peers[r], r, kind)
		if err != nil {
			return nil, err
		}
		all[r] = b
	}
	return all, nil
}

func (c *Comm) send(ctx context.Context, conn net.Conn, peer int, kind frameKind, data []byte) error {
	if conn == nil {
		return fmt.Errorf("bootstrap: %v on rank %d: not connected to rank %d (Connect failed or Close was called)", kind, c.world.Rank, peer)
	}
	conn.SetWriteDeadline(c.deadline(ctx))
	if err := writeFrame(conn, kind, data); err != nil {
		if isTimeout(err) {
			return fmt.Errorf("bootstrap: %v on rank %d: rank %d did not take %d bytes within %v (is it stuck?)", kind, c.world.Rank, peer, len(data), c.timeout.Round(time.Second))
		}
		return fmt.Errorf("bootstrap: %v on rank %d: sending to rank %d: %v (did rank %d exit?)", kind, c.world.Rank, peer, err, peer)
	}
	return nil
}

func (c *Comm) recv(ctx context.Context, conn net.Conn, peer int, kind frameKind) ([]byte, error) {
	if conn == nil {
		return nil, fmt.Errorf("bootstrap: %v on rank %d: not connected to rank %d (Connect failed or Close was called)", kind, c.world.Rank, peer)
	}
	conn.SetReadDeadline(c.deadline(ctx))
	stop := context.AfterFunc(ctx, func() { conn.SetReadDeadline(time.Unix(1, 0)) })
	got, b, err := readFrame(conn)
	stop()
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, fmt.Errorf("bootstrap: %v on rank %d: stopped waiting for rank %d: %v", kind, c.world.Rank, peer, ctx.Err())
	case err != nil && isTimeout(err):
		return nil, fmt.Errorf("bootstrap: %v on rank %d: rank %d sent nothing within %v (is it still running, or stuck before the same step?)", kind, c.world.Rank, peer, c.timeout.Round(time.Second))
	case err != nil:
		return nil, fmt.Errorf("bootstrap: %v on rank %d: connection to rank %d lost: %v (did rank %d exit? its own output says why)", kind, c.world.Rank, peer, err, peer)
	case got == kindAbort && peer == 0 && c.world.Rank != 0:
		return nil, fmt.Errorf("bootstrap: %v on rank %d: rank 0 ended the run: %s", kind, c.world.Rank, b)
	case got == kindAbort:
		return nil, fmt.Errorf("bootstrap: %v on rank %d: rank %d failed: %s", kind, c.world.Rank, peer, b)
	case got == kindReport && c.world.Rank == 0:
		if c.early == nil {
			c.early = make([][]byte, c.world.Size)
		}
		c.early[peer] = b // Finish reads it from here
		return nil, fmt.Errorf("bootstrap: rank %d finished its run while rank 0 was still in %v: every rank must run the same plan with the same parameters and --iters", peer, kind)
	case got != kind:
		return nil, fmt.Errorf("bootstrap: rank %d called %v while rank %d called %v: every rank must call the same collectives in the same order", c.world.Rank, kind, peer, got)
	}
	return b, nil
}

// joinAll packs per-rank payloads into one: a count, then length-prefixed entries.
func joinAll(all [][]byte) []byte {
	n := 4
	for _, b := range all {
		n += 4 + len(b)
	}
	out := make([]byte, 0, n)
	out = appendU32(out, uint32(len(all)))
	for _, b := range all {
		out = appendU32(out, uint32(len(b)))
		out = append(out, b...)
	}
	return out
}

func splitAll(b []byte, size int) ([][]byte, error) {
	bad := errors.New("bootstrap: AllGather: malformed reply from rank 0 (mixed coredag versions?)")
	if len(b) < 4 || int(u32(b)) != size {
		return nil, bad
	}
	b = b[4:]
	all := make([][]byte, size)
	for r := range all {
		if len(b) < 4 {
			return nil, bad
		}
		n := int(u32(b))
		b = b[4:]
		if n > len(b) {
			return nil, bad
		}
		all[r] = b[:n:n]
		b = b[n:]
	}
	return all, nil
}

func appendU32(b []byte, v uint32) []byte {
	return append(b, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

func u32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}
