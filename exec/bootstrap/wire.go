package bootstrap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"

	"github.com/coredag/coredag/internal/budget"
)

// Wire format. Every message is a frame: kind (1 byte), payload length (4 bytes, big endian),
// payload. A connection opens with a handshake in which each side proves it knows the job secret
// without sending it (see auth.go):
//
//	rank r -> rank 0: hello      magic, version, nonce N1
//	rank 0 -> rank r: challenge  nonce N0, HMAC(secret, root label | N1 | N0)
//	rank r -> rank 0: proof      HMAC(secret, rank label | N1 | N0 | body), body
//	rank 0 -> rank r: welcome (once every rank has joined), reject or abort (reason in plain text)
//
// The body says which rank the sender is, the world size and the job's facts (Config.Job).
const (
	magic   = "coredag-bootstrap"
	version = 2

	// maxFrame bounds a payload after the handshake, and the data of a collective in all: rank 0
	// sends every rank's AllGather data in one frame.
	maxFrame = 64 << 20
	// maxHandshake bounds a handshake payload, which rank 0 reads from anyone who connects.
	maxHandshake = 64 << 10
)

// frameKind tags a frame with the collective that sent it, so that ranks calling different
// collectives (a bug in the caller) fail with a message instead of misreading each other's data.
type frameKind byte

const (
	kindHello     frameKind = 'H'
	kindChallenge frameKind = 'C'
	kindProof     frameKind = 'P'
	kindWelcome   frameKind = 'W'
	kindReject    frameKind = 'R'
	kindGather    frameKind = 'G'
	kindAllGather frameKind = 'A'
	kindBroadcast frameKind = 'B'
	kindBarrier   frameKind = 'b'
	kindAbort     frameKind = 'X' // payload: why the sender gave up
	kindReport    frameKind = 'V' // payload: the sender's Report, JSON
)

func (k frameKind) String() string {
	switch k {
	case kindHello:
		return "hello"
	case kindChallenge:
		return "challenge"
	case kindProof:
		return "proof"
	case kindWelcome:
		return "welcome"
	case kindReject:
		return "reject"
	case kindGather:
		return "Gather"
	case kindAllGather:
		return "AllGather"
	case kindBroadcast:
		return "Broadcast"
	case kindBarrier:
		return "Barrier"
	case kindAbort:
		return "abort"
	case kindReport:
		return "Finish"
	}
	return fmt.Sprintf("frame kind %#x", byte(k))
}

func writeFrame(w io.Writer, kind frameKind, payload []byte) error {
	if len(payload) > maxFrame {
		// Its length would not fit the header, or the reader would refuse it.
		return fmt.Errorf("a frame of %d bytes is more than the %d-byte limit", len(payload), maxFrame)
	}
	var hdr [5]byte
	hdr[0] = byte(kind)
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(payload)))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := w.Write(payload)
	return err
}

func readFrame(r io.Reader) (frameKind, []byte, error) { return readFrameMax(r, maxFrame) }

// readFrameMax reads a frame whose payload may hold at most limit bytes.
func readFrameMax(r io.Reader, limit uint32) (frameKind, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > limit {
		return 0, nil, fmt.Errorf("frame of %d bytes exceeds the %d-byte limit (is a different program talking to this port?)", n, limit)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return 0, nil, err
	}
	return frameKind(hdr[0]), buf, nil
}

// encodeHello is the first frame's payload: magic, version and the dialler's nonce.
func encodeHello(nonce []byte) []byte {
	b := make([]byte, 0, len(magic)+2+len(nonce))
	b = append(b, magic...)
	b = binary.BigEndian.AppendUint16(b, version)
	return append(b, nonce...)
}

// decodeHello returns the dialler's nonce.
func decodeHello(b []byte) ([]byte, error) {
	if len(b) < len(magic)+2 || string(b[:len(magic)]) != magic {
		return nil, errors.New("not a coredag bootstrap hello")
	}
	b = b[len(magic):]
	if v := binary.BigEndian.Uint16(b); v != version || len(b) != 2+nonceLen {
		return nil, fmt.Errorf("bootstrap protocol version %d, this build speaks %d (run the same coredag binary on every rank)", v, version)
	}
	return b[2:], nil
}

// member is what a rank says about itself once it has proved the secret.
type member struct {
	rank, size int
	job        []Fact
}

func (m member) encode() []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(m.rank))
	b = binary.BigEndian.AppendUint32(b, uint32(m.size))
	b = binary.BigEndian.AppendUint32(b, uint32(len(m.job)))
	for _, f := range m.job {
		for _, s := range []string{f.Key, f.Text} {
			b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
			b = append(b, s...)
		}
	}
	return b
}

func decodeMember(b []byte) (member, error) {
	bad := errors.New("malformed membership (run the same coredag binary on every rank)")
	next := func() (uint32, bool) {
		if len(b) < 4 {
			return 0, false
		}
		v := binary.BigEndian.Uint32(b)
		b = b[4:]
		return v, true
	}
	str := func() (string, bool) {
		n, ok := next()
		if !ok || uint64(n) > uint64(len(b)) {
			return "", false
		}
		s := string(b[:n])
		b = b[n:]
		return s, true
	}
	rank, ok1 := next()
	size, ok2 := next()
	n, ok3 := next()
	// Each fact takes at least 8 bytes, so n cannot ask for more than the payload holds.
	if !ok1 || !ok2 || !ok3 || uint64(n)*8 > uint64(len(b)) {
		return member{}, bad
	}
	m := member{rank: int(int32(rank)), size: int(int32(size)), job: make([]Fact, n)}
	for i := range m.job {
		k, ok1 := str()
		t, ok2 := str()
		if !ok1 || !ok2 {
			return member{}, bad
		}
		m.job[i] = Fact{Key: k, Text: t}
	}
	if len(b) != 0 {
		return member{}, bad
	}
	return m, nil
}

// sizeText writes a byte count for a message: "64 MiB", "94371856 bytes (about 90 MiB)", "100
// bytes". The exact count stays, so that a size just over a bound does not read as equal to it.
func sizeText(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return budget.Format(n)
	case n >= 1<<20:
		return fmt.Sprintf("%d bytes (about %s)", n, budget.Format(n))
	}
	return fmt.Sprintf("%d bytes", n)
}

// isTimeout reports whether err is a network deadline expiry.
func isTimeout(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
