package bootstrap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
)

// Wire format. Every message is a frame: kind (1 byte), payload length (4 bytes, big endian),
// payload. The first frame on a connection is a hello from the connecting rank; rank 0 answers
// with a welcome or a reject frame whose payload is the reason in plain text.
const (
	magic   = "coredag-bootstrap"
	version = 1

	// maxFrame bounds a payload so that a stray client (or a port scanner) cannot make rank 0
	// allocate without limit.
	maxFrame = 64 << 20
)

// frameKind tags a frame with the collective that sent it, so that ranks calling different
// collectives (a bug in the caller) fail with a message instead of misreading each other's data.
type frameKind byte

const (
	kindHello     frameKind = 'H'
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
	var hdr [5]byte
	hdr[0] = byte(kind)
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(payload)))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := w.Write(payload)
	return err
}

func readFrame(r io.Reader) (frameKind, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxFrame {
		return 0, nil, fmt.Errorf("frame of %d bytes exceeds the %d-byte limit (is a different program talking to this port?)", n, maxFrame)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return 0, nil, err
	}
	return frameKind(hdr[0]), buf, nil
}

// hello is what a connecting rank says first.
type hello struct {
	rank, size int
}

func (h hello) encode() []byte {
	b := make([]byte, 0, len(magic)+10)
	b = append(b, magic...)
	b = binary.BigEndian.AppendUint16(b, version)
	b = binary.BigEndian.AppendUint32(b, uint32(h.rank))
	b = binary.BigEndian.AppendUint32(b, uint32(h.size))
	return b
}

func decodeHello(b []byte) (hello, error) {
	if len(b) != len(magic)+10 || string(b[:len(magic)]) != magic {
		return hello{}, errors.New("not a coredag bootstrap hello")
	}
	b = b[len(magic):]
	if v := binary.BigEndian.Uint16(b); v != version {
		return hello{}, fmt.Errorf("bootstrap protocol version %d, this build speaks %d (run the same coredag binary on every rank)", v, version)
	}
	return hello{rank: int(binary.BigEndian.Uint32(b[2:])), size: int(binary.BigEndian.Uint32(b[6:]))}, nil
}

// isTimeout reports whether err is a network deadline expiry.
func isTimeout(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
