package bootstrap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// freeAddr returns a loopback address with a port nobody listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// testSecret is the job secret of the tests' jobs.
var testSecret = []byte("0123456789abcdef-test-job-secret")

// cfg is the Config of rank r of a job of size ranks meeting at addr.
func cfg(addr string, r, size int, timeout time.Duration) Config {
	return Config{World: World{Rank: r, Size: size}, Addr: addr, Secret: testSecret, Timeout: timeout}
}

// group runs f on size ranks concurrently, each with its own Comm, and returns their errors.
func group(t *testing.T, size int, timeout time.Duration, f func(c *Comm) error) []error {
	t.Helper()
	addr := freeAddr(t)
	errs := make([]error, size)
	var wg sync.WaitGroup
	for r := range size {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := Connect(context.Background(), cfg(addr, r, size, timeout))
			if err != nil {
				errs[r] = err
				return
			}
			defer c.Close()
			errs[r] = f(c)
		}()
	}
	wg.Wait()
	return errs
}

func TestCollectives(t *testing.T) {
	for _, size := range []int{1, 2, 5} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			errs := group(t, size, 10*time.Second, func(c *Comm) error {
				ctx := context.Background()
				all, err := c.AllGather(ctx, []byte(fmt.Sprintf("rank %d", c.Rank())))
				if err != nil {
					return err
				}
				for r, b := range all {
					if string(b) != fmt.Sprintf("rank %d", r) {
						return fmt.Errorf("rank %d: AllGather[%d] = %q", c.Rank(), r, b)
					}
				}
				if err := c.Barrier(ctx); err != nil {
					return err
				}
				b, err := c.Broadcast(ctx, []byte("from 0"))
				if err != nil || string(b) != "from 0" {
					return fmt.Errorf("rank %d: Broadcast = %q, %v", c.Rank(), b, err)
				}
				got, err := c.Gather(ctx, []byte{byte(c.Rank() * 3)})
				if err != nil {
					return err
				}
				if c.Rank() != 0 {
					if got != nil {
						return fmt.Errorf("rank %d: Gather returned data off rank 0", c.Rank())
					}
					return nil
				}
				for r := range got {
					if len(got[r]) != 1 || got[r][0] != byte(r*3) {
						return fmt.Errorf("Gather[%d] = %v", r, got[r])
					}
				}
				return nil
			})
			for r, err := range errs {
				require.NoError(t, err, "rank %d", r)
			}
		})
	}
}

func TestExchange(t *testing.T) {
	type ep struct {
		Rank int
		QPN  uint32
	}
	errs := group(t, 3, 10*time.Second, func(c *Comm) error {
		// Rank r contributes one entry, except that rank 0 runs two ranks (0 and 3).
		local := []ep{{Rank: c.Rank(), QPN: uint32(100 + c.Rank())}}
		if c.Rank() == 0 {
			local = append(local, ep{Rank: 3, QPN: 103})
		}
		all, err := Exchange(c, 4, func(e ep) int { return e.Rank })(context.Background(), local)
		if err != nil {
			return err
		}
		for r, e := range all {
			if e.Rank != r || e.QPN != uint32(100+r) {
				return fmt.Errorf("rank %d: entry %d = %+v", c.Rank(), r, e)
			}
		}
		return nil
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
}

func TestMissingRankTimesOut(t *testing.T) {
	addr := freeAddr(t)
	start := time.Now()
	_, err := Connect(context.Background(), cfg(addr, 0, 3, 300*time.Millisecond))
	require.ErrorContains(t, err, "ranks 1, 2 never connected")
	require.Less(t, time.Since(start), 5*time.Second)

	_, err = Connect(context.Background(), cfg(addr, 2, 3, 300*time.Millisecond))
	require.ErrorContains(t, err, "rank 2 could not reach rank 0 at "+addr)
}

func TestMismatchedWorld(t *testing.T) {
	addr := freeAddr(t)
	var wg sync.WaitGroup
	var rootErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, rootErr = Connect(context.Background(), cfg(addr, 0, 2, 5*time.Second))
	}()
	_, err := Connect(context.Background(), cfg(addr, 1, 3, 5*time.Second))
	wg.Wait()
	require.ErrorContains(t, err, "rank 0 refused rank 1: rank 1 says there are 3 ranks, rank 0 says 2")
	require.ErrorContains(t, rootErr, "start every rank with the same world size")
}

func TestStrayClientIsIgnored(t *testing.T) {
	addr := freeAddr(t)
	errs := make(chan error, 1)
	go func() {
		c, err := Connect(context.Background(), cfg(addr, 0, 2, 5*time.Second))
		if err == nil {
			c.Close()
		}
		errs <- err
	}()
	var stray net.Conn
	require.Eventually(t, func() bool {
		var err error
		stray, err = net.Dial("tcp", addr)
		return err == nil
	}, 5*time.Second, 10*time.Millisecond)
	stray.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
	stray.Close()
	c, err := Connect(context.Background(), cfg(addr, 1, 2, 5*time.Second))
	require.NoError(t, err)
	c.Close()
	require.NoError(t, <-errs)
}

func TestPeerExitIsReported(t *testing.T) {
	errs := group(t, 2, 5*time.Second, func(c *Comm) error {
		if c.Rank() == 1 {
			return nil // leaves without taking part: its deferred Close drops the connection
		}
		_, err := c.AllGather(context.Background(), []byte("x"))
		return err
	})
	require.Error(t, errs[0])
	require.Regexp(t, `AllGather on rank 0: connection to rank 1 lost: .* \(did rank 1 exit`, errs[0].Error())
}

func TestMismatchedCollective(t *testing.T) {
	errs := group(t, 2, 5*time.Second, func(c *Comm) error {
		if c.Rank() == 1 {
			c.Barrier(context.Background())
			return nil
		}
		_, err := c.Gather(context.Background(), nil)
		return err
	})
	require.ErrorContains(t, errs[0], "rank 0 called Gather while rank 1 called Barrier")
}

func TestAllGatherOverTheFrameLimit(t *testing.T) {
	// Each rank's 30 MiB fits a frame, but rank 0's reply, which carries all three, does not:
	// every rank fails saying so, instead of rank 0 sending a frame the others refuse to read.
	errs := group(t, 3, 20*time.Second, func(c *Comm) error {
		_, err := c.AllGather(context.Background(), make([]byte, 30<<20))
		return err
	})
	const why = "the 3 ranks' AllGather data take 94371856 bytes (about 90 MiB), more than the 64 MiB a bootstrap collective carries"
	require.EqualError(t, errs[0], "bootstrap: AllGather on rank 0: "+why)
	for r := 1; r < 3; r++ {
		require.EqualError(t, errs[r], fmt.Sprintf("bootstrap: AllGather on rank %d: rank 0 ended the run: %s", r, why))
	}
}

func TestCollectiveDataOverTheFrameLimit(t *testing.T) {
	// Rank 2's data alone is over the limit: it says so without sending it, and tells rank 0,
	// which would otherwise wait for it until the timeout, and which tells rank 1 (it waited
	// for rank 0's answer until its own timeout, blaming rank 0).
	start := time.Now()
	errs := group(t, 3, 20*time.Second, func(c *Comm) error {
		data := []byte("x")
		if c.Rank() == 2 {
			data = make([]byte, maxFrame+1)
		}
		_, err := c.AllGather(context.Background(), data)
		return err
	})
	const why = "rank 2's AllGather data take 67108865 bytes (about 64 MiB), more than the 64 MiB a bootstrap collective carries"
	require.EqualError(t, errs[2], "bootstrap: AllGather on rank 2: "+why)
	require.EqualError(t, errs[0], "bootstrap: AllGather on rank 0: rank 2 failed: "+why)
	require.EqualError(t, errs[1], "bootstrap: AllGather on rank 1: rank 0 ended the run: AllGather on rank 0: rank 2 failed: "+why)
	require.Less(t, time.Since(start), 10*time.Second, "no rank waited for the timeout")

	// Rank 0's Broadcast tells every rank.
	errs = group(t, 3, 20*time.Second, func(c *Comm) error {
		_, err := c.Broadcast(context.Background(), make([]byte, 65<<20))
		return err
	})
	require.EqualError(t, errs[0], "bootstrap: Broadcast on rank 0: rank 0's Broadcast data take 65 MiB, more than the 64 MiB a bootstrap collective carries")
	require.ErrorContains(t, errs[2], "Broadcast on rank 2: rank 0 ended the run: rank 0's Broadcast data take 65 MiB")

	// Gather keeps no more on rank 0 than AllGather would send; the other ranks, which do not wait
	// for rank 0, learn why at their next collective.
	errs = group(t, 3, 20*time.Second, func(c *Comm) error {
		if _, err := c.Gather(context.Background(), make([]byte, 30<<20)); err != nil {
			return err
		}
		return c.Barrier(context.Background())
	})
	require.ErrorContains(t, errs[0], "Gather on rank 0: the 3 ranks' Gather data take 94371856 bytes (about 90 MiB), more than the 64 MiB")
	require.ErrorContains(t, errs[1], "Barrier on rank 1: rank 0 ended the run: the 3 ranks' Gather data take")
}

func TestWriteFrameRefusesOverTheLimit(t *testing.T) {
	// A length over 4 GiB would wrap in the header; anything over maxFrame the reader refuses.
	var buf bytes.Buffer
	require.EqualError(t, writeFrame(&buf, kindGather, make([]byte, maxFrame+1)), "a frame of 67108865 bytes is more than the 67108864-byte limit")
	require.Zero(t, buf.Len(), "nothing written")
	require.NoError(t, writeFrame(&buf, kindGather, make([]byte, maxFrame)))
	kind, b, err := readFrame(&buf)
	require.NoError(t, err)
	require.Equal(t, kindGather, kind)
	require.Len(t, b, maxFrame)
}

func TestFinishAfterFailure(t *testing.T) {
	// Rank 1 fails; ranks 0 and 2 are blocked in a Barrier it never reaches. The abort releases
	// them at once, and rank 0 collects all three verdicts.
	var reports []Report
	start := time.Now()
	errs := group(t, 3, 20*time.Second, func(c *Comm) error {
		ctx := context.Background()
		own := Report{Rank: c.Rank(), OK: true}
		if c.Rank() == 1 {
			own = Report{Rank: 1, Error: "remote access error in tx[0]"}
		} else if err := c.Barrier(ctx); err != nil {
			own = Report{Rank: c.Rank(), Error: err.Error()}
		}
		all, err := Finish(ctx, c, own)
		if c.Rank() == 0 {
			reports = all
		}
		return err
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	require.Less(t, time.Since(start), 10*time.Second, "no rank waited for a timeout")
	require.Len(t, reports, 3)
	require.Equal(t, "rank 1: FAIL: remote access error in tx[0]", reports[1].String())
	require.Contains(t, reports[0].Error, "rank 1 failed: rank 1: FAIL: remote access error in tx[0]")
	require.Contains(t, reports[2].Error, "rank 0 ended the run")
	require.ErrorContains(t, AllOK(reports), "ranks 0, 1, 2 failed")
}

func TestFinishAllOK(t *testing.T) {
	var reports []Report
	errs := group(t, 4, 10*time.Second, func(c *Comm) error {
		all, err := Finish(context.Background(), c, Report{Rank: c.Rank(), OK: true, Median: time.Millisecond})
		if c.Rank() == 0 {
			reports = all
		}
		return err
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	require.NoError(t, AllOK(reports))
	for r, rep := range reports {
		require.Equal(t, fmt.Sprintf("rank %d: ok", r), rep.String())
	}
}

func TestFinishWaitsOneTimeoutInAll(t *testing.T) {
	// Ranks 1 and 2 never report (stuck in their runs): rank 0 waits one timeout for both, not
	// one each.
	const timeout = 2 * time.Second
	var reports []Report
	var took time.Duration
	done := make(chan struct{})
	errs := group(t, 3, timeout, func(c *Comm) error {
		if c.Rank() != 0 {
			<-done
			return nil
		}
		defer close(done)
		start := time.Now()
		all, err := Finish(context.Background(), c, Report{Rank: 0, OK: true})
		took, reports = time.Since(start), all
		return err
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	require.Less(t, took, timeout+timeout*3/4, "rank 0 waited one timeout per silent rank")
	for r := 1; r < 3; r++ {
		require.Equal(t, fmt.Sprintf("rank %d: FAIL: sent no verdict within 2s: it is still running or stuck (its own output says where)", r), reports[r].String())
	}
}

func TestFinishStopsAtContextEnd(t *testing.T) {
	// Rank 1 reports, rank 2 never does, and rank 0's context ends while it waits for rank 2:
	// Finish returns at once with rank 1's verdict, and says that rank 2's was not collected.
	var reports []Report
	var took time.Duration
	sent, done := make(chan struct{}), make(chan struct{})
	errs := group(t, 3, 20*time.Second, func(c *Comm) error {
		switch c.Rank() {
		case 1:
			_, err := Finish(context.Background(), c, Report{Rank: 1, OK: true})
			close(sent)
			return err
		case 2:
			<-done
			return nil
		}
		defer close(done)
		<-sent
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		time.AfterFunc(200*time.Millisecond, cancel)
		start := time.Now()
		all, err := Finish(ctx, c, Report{Rank: 0, OK: true})
		took, reports = time.Since(start), all
		return err
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	require.Less(t, took, 2*time.Second, "Finish went on waiting after its context ended")
	require.Len(t, reports, 3)
	require.True(t, reports[1].OK, "%v", reports[1])
	require.Equal(t, "rank 2: FAIL: verdict not collected: rank 0 stopped waiting for it: context canceled (its own output says how its run ended)", reports[2].String())

	// A context that has ended already collects nothing, without waiting.
	done = make(chan struct{})
	errs = group(t, 2, 20*time.Second, func(c *Comm) error {
		if c.Rank() != 0 {
			<-done
			return nil
		}
		defer close(done)
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(errors.New("interrupted by SIGINT"))
		start := time.Now()
		all, err := Finish(ctx, c, Report{Rank: 0, OK: true})
		took, reports = time.Since(start), all
		return err
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	require.Less(t, took, 2*time.Second)
	require.Contains(t, reports[1].String(), "rank 1: FAIL: verdict not collected: rank 0 stopped waiting for it: interrupted by SIGINT")
}

func TestRankFinishedEarly(t *testing.T) {
	// Rank 1 runs fewer iterations than rank 0: its report arrives while rank 0 waits in a
	// Barrier. Rank 0 says so, and still shows rank 1's own verdict.
	var reports []Report
	errs := group(t, 2, 10*time.Second, func(c *Comm) error {
		ctx := context.Background()
		own := Report{Rank: c.Rank(), OK: true}
		if c.Rank() == 0 {
			if err := c.Barrier(ctx); err != nil {
				own = Report{Rank: 0, Error: err.Error()}
			}
		}
		all, err := Finish(ctx, c, own)
		if c.Rank() == 0 {
			reports = all
		}
		return err
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	require.Contains(t, reports[0].Error, "rank 1 finished its run while rank 0 was still in Barrier")
	require.True(t, reports[1].OK, "%v", reports[1])
}
