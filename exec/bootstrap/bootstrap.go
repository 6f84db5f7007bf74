// Package bootstrap connects the processes of a multi-process coredag run over TCP before any RDMA
// traffic flows, and carries the small exchanges a run needs: queue pair numbers, GIDs, PSNs,
// buffer addresses and rkeys before the run, every rank's verdict after it.
//
// Rank 0 listens on the bootstrap address; every other rank connects to it (retrying until rank 0
// is up). Each connection opens with a handshake in which both sides prove they hold the job's
// secret (Config.Secret, see ResolveSecret) without sending it: a process that does not hold it can
// neither join the run nor pose as its rank 0, and one that connects to rank 0 and then says
// nothing, or nonsense, is dropped without disturbing the ranks of the job. The ranks also compare
// what they are about to run (Config.Job) and refuse at once when it differs. Rank 0 answers the
// ranks once all have joined, and closes its listener then.
//
// The topology is a star: collectives go through rank 0, which is plenty for the few kilobytes
// exchanged once per run. A collective carries at most 64 MiB, all ranks' data together; more is
// refused on every rank, naming the size. Every wait is bounded by a timeout, and an expired wait
// names the rank that did not answer.
//
// Rank and world size come from flags or from the environment of the usual launchers (see
// ResolveWorld), so the same command line works under mpirun and srun.
package bootstrap

import (
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coredag/coredag/internal/english"
)

// DefaultTimeout bounds each bootstrap wait when Config.Timeout is zero: connecting all ranks, and
// each collective afterwards.
const DefaultTimeout = 60 * time.Second

// Config says how to reach the other ranks.
type Config struct {
	World
	// Addr is HOST:PORT, with a fixed port (CheckAddr). Rank 0 listens on it, and only there (HOST
	// may be empty or 0.0.0.0 to listen on all interfaces); the other ranks connect to it, so
	// there HOST must name rank 0's machine.
	Addr string
	// Secret is the job secret, the same on every rank and at least MinSecretLen bytes
	// (ResolveSecret finds it). More than one rank cannot connect without it.
	Secret []byte
	// Job is what every rank must agree on (see Fact); rank 0 refuses a rank whose facts differ
	// from its own, naming the difference. Nil compares nothing.
	Job []Fact
	// Timeout bounds each wait (DefaultTimeout when zero).
	Timeout time.Duration
	// Logf, when not nil, hears on rank 0 about the first few connections dropped because they
	// did not prove the job secret (the run goes on regardless). Connect calls it from its own
	// goroutine.
	Logf func(format string, args ...any)
}

// Comm is a connected group of ranks. Its collectives must be called by every rank in the same
// order, like MPI's. A Comm is not safe for concurrent use.
type Comm struct {
	world   World
	addr    string
	timeout time.Duration
	secret  []byte
	job     []Fact
	logf    func(format string, args ...any)
	peers   []net.Conn // on rank 0: peers[r] is rank r's connection (peers[0] is nil)
	root    net.Conn   // on other ranks: the connection to rank 0
	early   [][]byte   // on rank 0: reports that arrived during a collective, by rank
}

// Rank returns this process's rank.
func (c *Comm) Rank() int { return c.world.Rank }

// Size returns the number of ranks.
func (c *Comm) Size() int { return c.world.Size }

// CheckAddr checks a bootstrap address: HOST:PORT with a fixed port, since the ranks that connect
// must know where rank 0 listens.
func CheckAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("bootstrap address %q: %v (want HOST:PORT)", addr, err)
	}
	p, err := net.LookupPort("tcp", port)
	if err != nil {
		return fmt.Errorf("bootstrap address %s: %v", addr, err)
	}
	if p == 0 {
		return fmt.Errorf("bootstrap address %s has port 0: rank 0 would listen on a port the system picks, which the other ranks cannot know: give a free port, the same on every rank", addr)
	}
	return nil
}

// LocalAddr is this host's IPv4 address on its route to the bootstrap at addr (HOST:PORT, HOST a
// name or an address): the address a connection to rank 0 leaves from, on rank 0 the address
// it listens on. Endpoints of ranks on several hosts can bind it. Nothing is sent.
func LocalAddr(addr string) (string, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("bootstrap address %q: %v (want HOST:PORT)", addr, err)
	}
	conn, err := net.Dial("udp4", net.JoinHostPort(host, "9"))
	if err != nil {
		return "", fmt.Errorf("no IPv4 route from this host to %s (%v)", host, err)
	}
	defer conn.Close()
	return conn.LocalAddr().(*net.UDPAddr).IP.String(), nil
}

// Connect joins the group described by cfg: rank 0 waits until every other rank has connected
// and proved the job secret, the others connect to rank 0. It returns when all ranks are
// connected, or with an error naming the ranks that were missing when the timeout or ctx expired,
// or the difference between ranks that do not run the same job.
func Connect(ctx context.Context, cfg Config) (*Comm, error) {
	if cfg.Size < 1 || cfg.Size > MaxSize || cfg.Rank < 0 || cfg.Rank >= cfg.Size {
		return nil, fmt.Errorf("bootstrap: rank %d of %d ranks is not a valid position (need 0 <= rank < ranks <= %d)", cfg.Rank, cfg.Size, MaxSize)
	}
	c := &Comm{world: cfg.World, addr: cfg.Addr, timeout: cfg.Timeout, secret: cfg.Secret, job: cfg.Job, logf: cfg.Logf}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if cfg.Size == 1 {
		return c, nil
	}
	if cfg.Addr == "" {
		return nil, fmt.Errorf("bootstrap: %d ranks need a bootstrap address: pass --bootstrap HOST:PORT (rank 0's host and a free TCP port)", cfg.Size)
	}
	if err := CheckAddr(cfg.Addr); err != nil {
		return nil, fmt.Errorf("bootstrap: %v", err)
	}
	if len(cfg.Secret) == 0 {
		return nil, fmt.Errorf("bootstrap: %d ranks need a job secret that every rank holds and other users cannot read (Config.Secret): %s", cfg.Size, NoSecretHelp)
	}
	if err := checkSecret(cfg.Secret, "the job secret"); err != nil {
		return nil, fmt.Errorf("bootstrap: %v", err)
	}
	if n := len(member{job: cfg.Job}.encode()); n > maxJob {
		return nil, fmt.Errorf("bootstrap: the job's facts take %d bytes, more than the %d a handshake carries", n, maxJob)
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

// Limits of rank 0's handshakes, which anyone who can reach the port can start.
const (
	// helloTimeout bounds each handshake step, on both sides.
	helloTimeout = 5 * time.Second
	// maxPending bounds the handshakes under way at once. A connection beyond it ends the oldest
	// handshake: a real rank's takes a round trip, so a crowd of silent connections cannot keep
	// it out unless it is renewed thousands of times a second.
	maxPending = 64
	// maxLogged is how many dropped connections rank 0 reports through Config.Logf.
	maxLogged = 3
)

// soon is the earlier of deadline and now + helloTimeout.
func soon(deadline time.Time) time.Time {
	if d := time.Now().Add(helloTimeout); d.Before(deadline) {
		return d
	}
	return deadline
}

// arrival is the outcome of one connection to rank 0's listener.
type arrival struct {
	conn      net.Conn // set when the peer proved the secret
	from      string   // the peer's address
	m         member
	err       error // the peer is not a rank of this job: dropped
	listenErr error // accepting failed (the wait is over)
}

// accept runs on rank 0: listen, handshake with every connection concurrently (a silent or
// hostile one cannot hold up the others), and keep one connection for each other rank.
func (c *Comm) accept(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", c.addr)
	if err != nil {
		return fmt.Errorf("bootstrap: rank 0 cannot listen on %s: %v (pick a free port, and a HOST that is an address of this machine)", c.addr, err)
	}
	tl := ln.(*net.TCPListener)
	deadline := c.deadline(ctx)
	if err := tl.SetDeadline(deadline); err != nil {
		ln.Close()
		return fmt.Errorf("bootstrap: %v", err)
	}
	hctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(hctx, func() { tl.SetDeadline(time.Unix(1, 0)) })
	arrivals := make(chan arrival)
	var wg sync.WaitGroup
	defer func() {
		cancel() // ends the handshakes still under way and the accept loop
		stop()
		ln.Close()
		wg.Wait()
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.acceptLoop(hctx, tl, deadline, arrivals, &wg)
	}()
	c.peers = make([]net.Conn, c.world.Size)
	joined, dropped := 1, 0
	var twice []string
	for joined < c.world.Size {
		a := <-arrivals
		if a.listenErr != nil {
			return c.joinFailed(ctx, a.listenErr, dropped, twice)
		}
		if a.err != nil {
			dropped++
			if c.logf != nil && dropped <= maxLogged {
				more := ""
				if dropped == maxLogged {
					more = " (further ones are not reported)"
				}
				c.logf("bootstrap: rank 0 dropped a connection from %s: %v%s", a.from, a.err, more)
			}
			continue
		}
		r := a.m.rank
		var reason string
		switch {
		case a.m.size != c.world.Size:
			reason = fmt.Sprintf("rank %d says there are %d ranks, rank 0 says %d: start every rank with the same world size", r, a.m.size, c.world.Size)
		case r <= 0 || r >= c.world.Size:
			reason = fmt.Sprintf("rank %d is out of range 1..%d", r, c.world.Size-1)
		case c.peers[r] != nil:
			// The rank that joined first keeps its place; the run goes on without the second.
			twice = append(twice, fmt.Sprint(r))
			refuse(a.conn, kindReject, fmt.Sprintf("rank %d has joined already: two processes were given the same rank", r))
			continue
		default:
			if d := jobDiff(r, a.m.job, c.job); d != "" {
				reason = fmt.Sprintf("rank %d does not run the same job as rank 0: %s (start every rank with the same plan and options)", r, d)
			}
		}
		if reason != "" {
			refuse(a.conn, kindReject, reason)
			c.endJoin(reason)
			return fmt.Errorf("bootstrap: %s", reason)
		}
		c.peers[r] = a.conn
		joined++
	}
	for r := 1; r < c.world.Size; r++ {
		c.peers[r].SetWriteDeadline(soon(deadline))
		if err := writeFrame(c.peers[r], kindWelcome, nil); err != nil {
			reason := fmt.Sprintf("rank 0 could not answer rank %d: %v", r, err)
			c.endJoin(reason)
			return fmt.Errorf("bootstrap: %s", reason)
		}
		c.peers[r].SetWriteDeadline(time.Time{})
	}
	return nil
}

// acceptLoop accepts connections until ln fails, and runs each one's handshake in a goroutine of
// its own (counted in wg), sending the outcomes to out.
func (c *Comm) acceptLoop(ctx context.Context, ln *net.TCPListener, deadline time.Time, out chan<- arrival, wg *sync.WaitGroup) {
	send := func(a arrival) {
		select {
		case out <- a:
		case <-ctx.Done():
			if a.conn != nil {
				a.conn.Close()
			}
		}
	}
	var pending handshakes
	for {
		conn, err := ln.Accept()
		if err != nil {
			send(arrival{listenErr: err})
			return
		}
		from := conn.RemoteAddr().String()
		h := pending.add(conn)
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := c.admit(ctx, conn, deadline)
			switch {
			case !pending.remove(h):
			case err == nil:
				conn.SetDeadline(time.Time{}) // it proved the secret as it was being ended: keep it
			default:
				err = fmt.Errorf("it had not proved the job secret when %d newer connections came", maxPending)
			}
			if err != nil {
				conn.Close()
				conn = nil
			}
			send(arrival{conn: conn, from: from, m: m, err: err})
		}()
	}
}

// handshakes are rank 0's handshakes under way, oldest first.
type handshakes struct {
	mu   sync.Mutex
	list []*handshake
}

type handshake struct {
	conn    net.Conn
	evicted bool
}

// add records a new handshake; with maxPending under way, it ends the oldest.
func (p *handshakes) add(conn net.Conn) *handshake {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.list) >= maxPending {
		old := p.list[0]
		old.evicted = true
		old.conn.SetDeadline(time.Unix(1, 0))
		p.list = p.list[1:]
	}
	h := &handshake{conn: conn}
	p.list = append(p.list, h)
	return h
}

// remove forgets a finished handshake and reports whether add ended it.
func (p *handshakes) remove(h *handshake) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i := slices.Index(p.list, h); i >= 0 {
		p.list = slices.Delete(p.list, i, i+1)
	}
	return h.evicted
}

// admit is rank 0's side of the handshake with one connection: it returns what the peer says of
// itself once the peer has proved the job secret.
func (c *Comm) admit(ctx context.Context, conn net.Conn, deadline time.Time) (member, error) {
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	conn.SetDeadline(soon(deadline))
	kind, p, err := readFrameMax(conn, maxHandshake)
	if err != nil {
		return member{}, silence("sent no hello", err)
	}
	if kind != kindHello {
		return member{}, errors.New("not a coredag bootstrap hello")
	}
	n1, err := decodeHello(p)
	if err != nil {
		writeFrame(conn, kindReject, []byte(err.Error()))
		return member{}, err
	}
	n0, err := newNonce()
	if err != nil {
		return member{}, err
	}
	challenge := make([]byte, 0, nonceLen+macLen)
	challenge = append(append(challenge, n0...), proof(c.secret, rootLabel, n1, n0)...)
	conn.SetDeadline(soon(deadline))
	if err := writeFrame(conn, kindChallenge, challenge); err != nil {
		return member{}, err
	}
	kind, p, err = readFrameMax(conn, maxHandshake)
	if err != nil {
		return member{}, silence("did not prove it knows the job secret", err)
	}
	if kind != kindProof || len(p) < macLen || !hmac.Equal(p[:macLen], proof(c.secret, rankLabel, n1, n0, p[macLen:])) {
		return member{}, errNotJob
	}
	m, err := decodeMember(p[macLen:])
	if err != nil {
		return member{}, err
	}
	conn.SetDeadline(time.Time{})
	return m, nil
}

// silence says why a handshake read failed: what the peer did not do, and how.
func silence(what string, err error) error {
	if isTimeout(err) {
		return fmt.Errorf("it %s within %v", what, helloTimeout)
	}
	return fmt.Errorf("it %s: %v", what, err)
}

// refuse sends a last frame saying why and closes conn.
func refuse(conn net.Conn, kind frameKind, reason string) {
	conn.SetWriteDeadline(time.Now().Add(helloTimeout))
	writeFrame(conn, kind, []byte(reason))
	conn.Close()
}

// endJoin tells the ranks that have joined why the bootstrap failed, and closes their
// connections.
func (c *Comm) endJoin(reason string) {
	for i, p := range c.peers {
		if p != nil {
			refuse(p, kindAbort, reason)
			c.peers[i] = nil
		}
	}
}

// joinFailed is rank 0's error when the wait for the ranks ended (err) before all had joined.
func (c *Comm) joinFailed(ctx context.Context, err error, dropped int, twice []string) error {
	missing := c.missing()
	var notes []string
	if dropped > 0 {
		notes = append(notes, fmt.Sprintf("%s that did not prove the job secret dropped (a rank given another secret?)", english.Plural(dropped, "connection")))
	}
	if len(twice) > 0 {
		notes = append(notes, "rank "+strings.Join(twice, ", ")+" connected twice (two processes given the same rank)")
	}
	note := ""
	if len(notes) > 0 {
		note = "; " + strings.Join(notes, "; ")
	}
	var msg string
	switch {
	case ctx.Err() != nil:
		msg = fmt.Sprintf("rank 0 stopped waiting for %s: %v%s", missing, ctx.Err(), note)
	case isTimeout(err):
		msg = fmt.Sprintf("rank 0 waited %v on %s but %s never connected (are they running, given this address, a world of %d ranks and the job's secret?)%s",
			c.timeout.Round(time.Second), c.addr, missing, c.world.Size, note)
	default:
		msg = fmt.Sprintf("rank 0 accepting on %s: %v", c.addr, err)
	}
	c.endJoin(msg)
	return errors.New("bootstrap: " + msg)
}

// missing names the ranks rank 0 has not heard from, e.g. "rank 2" or "ranks 1, 3".
func (c *Comm) missing() string {
	var m []string
	for r := 1; r < c.world.Size; r++ {
		if c.peers == nil || c.peers[r] == nil {
			m = append(m, fmt.Sprint(r))
		}
	}
	if len(m) == 1 {
		return "rank " + m[0]
	}
	return "ranks " + strings.Join(m, ", ")
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

// dial runs on ranks other than 0: connect to rank 0, retrying until it listens, then join.
func (c *Comm) dial(ctx context.Context) error {
	deadline := c.deadline(ctx)
	var last error
	for {
		d := net.Dialer{Deadline: deadline}
		conn, err := d.DialContext(ctx, "tcp", c.addr)
		if err == nil {
			stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
			retry, jerr := c.join(conn, deadline)
			stop()
			if jerr == nil {
				c.root = conn
				return nil
			}
			conn.Close()
			if !retry && ctx.Err() == nil {
				return jerr
			}
			err = jerr
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

// join is a dialling rank's side of the handshake: check that the listener is this job's rank 0,
// prove the secret, say who this rank is, and wait for rank 0's welcome. retry says that the
// connection was closed before rank 0 proved anything, so trying again may help.
func (c *Comm) join(conn net.Conn, deadline time.Time) (retry bool, err error) {
	r := c.world.Rank
	n1, err := newNonce()
	if err != nil {
		return false, err
	}
	conn.SetDeadline(soon(deadline))
	if err := writeFrame(conn, kindHello, encodeHello(n1)); err != nil {
		return true, fmt.Errorf("bootstrap: rank %d greeting rank 0 at %s: %v", r, c.addr, err)
	}
	kind, p, err := readFrameMax(conn, maxHandshake)
	switch {
	case err != nil && isTimeout(err):
		return false, fmt.Errorf("bootstrap: rank %d: the process at %s accepted the connection but did not answer within %v (is it a coredag rank 0?)", r, c.addr, helloTimeout)
	case err != nil:
		return true, fmt.Errorf("bootstrap: rank %d: %s closed the connection: %v (is something else listening on that port?)", r, c.addr, err)
	case kind == kindReject:
		return false, fmt.Errorf("bootstrap: rank 0 at %s refused rank %d: %s", c.addr, r, p)
	case kind != kindChallenge || len(p) != nonceLen+macLen:
		return false, fmt.Errorf("bootstrap: rank %d: unexpected %v from %s (is it a coredag rank 0?)", r, kind, c.addr)
	}
	n0 := p[:nonceLen]
	if !hmac.Equal(p[nonceLen:], proof(c.secret, rootLabel, n1, n0)) {
		return false, fmt.Errorf("bootstrap: rank %d: the process listening on %s is not this job's rank 0: it does not know the job secret (another program or another user holds that port, or rank 0 was given another secret); rank %d told it nothing", r, c.addr, r)
	}
	body := member{rank: r, size: c.world.Size, job: c.job}.encode()
	msg := make([]byte, 0, macLen+len(body))
	msg = append(append(msg, proof(c.secret, rankLabel, n1, n0, body)...), body...)
	if err := writeFrame(conn, kindProof, msg); err != nil {
		return false, fmt.Errorf("bootstrap: rank %d joining rank 0 at %s: %v", r, c.addr, err)
	}
	conn.SetDeadline(deadline)
	kind, p, err = readFrameMax(conn, maxHandshake)
	switch {
	case err != nil && isTimeout(err):
		return false, fmt.Errorf("bootstrap: rank %d joined rank 0 at %s, but not every rank joined within %v (rank 0's output names the missing ones)", r, c.addr, c.timeout.Round(time.Second))
	case err != nil:
		return false, fmt.Errorf("bootstrap: rank %d: rank 0 at %s closed the connection before every rank had joined: %v (rank 0's output says why)", r, c.addr, err)
	case kind == kindReject:
		return false, fmt.Errorf("bootstrap: rank 0 refused rank %d: %s", r, p)
	case kind == kindAbort:
		return false, fmt.Errorf("bootstrap: rank 0 ended the bootstrap: %s", p)
	case kind != kindWelcome:
		return false, fmt.Errorf("bootstrap: rank %d: unexpected %v from rank 0 at %s", r, kind, c.addr)
	}
	conn.SetDeadline(time.Time{})
	return false, nil
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
// other ranks it returns nil once rank 0 has the data. When the ranks' data together take more
// than a collective carries, rank 0 fails, and the other ranks learn why at their next collective.
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
	if len(data) > maxFrame {
		reason := tooLarge(fmt.Sprintf("rank 0's %v data take", kindBroadcast), int64(len(data)))
		c.abort(ctx, reason)
		return nil, fmt.Errorf("bootstrap: %v on rank 0: %s", kindBroadcast, reason)
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

// collect runs on rank 0: read one frame of the given kind from every other rank. The data of all
// ranks together, as joinAll packs them, may take at most maxFrame bytes; past that, collect keeps
// no more of it but still reads every rank's frame, so that each rank has sent its part and waits
// for rank 0 when the refusal comes (a rank still sending to a connection closed with data unread
// would only see it reset), and then tells every rank why it gives up.
func (c *Comm) collect(ctx context.Context, kind frameKind, own []byte) ([][]byte, error) {
	all := make([][]byte, c.world.Size)
	all[0] = own
	total := int64(4 + 4 + len(own))
	for r := 1; r < c.world.Size; r++ {
		b, err := c.recv(ctx, c.peers[r], r, kind)
		if err != nil {
			// The others wait for rank 0's answer: tell them now, rather than let them wait
			// out their timeout and blame rank 0.
			c.abort(ctx, strings.TrimPrefix(firstLine(err.Error()), "bootstrap: "))
			return nil, err
		}
		if total += 4 + int64(len(b)); total <= maxFrame {
			all[r] = b
		}
	}
	if total > maxFrame {
		reason := tooLarge(fmt.Sprintf("the %d ranks' %v data take", c.world.Size, kind), total)
		c.abort(ctx, reason)
		return nil, fmt.Errorf("bootstrap: %v on rank 0: %s", kind, reason)
	}
	return all, nil
}

// tooLarge says that what takes n bytes is more than a collective carries.
func tooLarge(what string, n int64) string {
	return fmt.Sprintf("%s %s, more than the %s a bootstrap collective carries", what, sizeText(n), sizeText(maxFrame))
}

func (c *Comm) send(ctx context.Context, conn net.Conn, peer int, kind frameKind, data []byte) error {
	if conn == nil {
		return fmt.Errorf("bootstrap: %v on rank %d: not connected to rank %d (Connect failed or Close was called)", kind, c.world.Rank, peer)
	}
	conn.SetWriteDeadline(c.deadline(ctx))
	if len(data) > maxFrame {
		// Tell the peer, which would otherwise wait for the data until the timeout.
		reason := tooLarge(fmt.Sprintf("rank %d's %v data take", c.world.Rank, kind), int64(len(data)))
		writeFrame(conn, kindAbort, []byte(reason))
		return fmt.Errorf("bootstrap: %v on rank %d: %s", kind, c.world.Rank, reason)
	}
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
