package atomicfile

import (
	"errors"
	"os"
	"sync"
	"syscall"
)

// A large file is written around the page cache. Its first options.directAfter bytes go through the
// cache as usual; from there on (where the offset is aligned), the temporary file is switched to
// O_DIRECT and written in whole chunks from page-aligned buffers, by a goroutine of its own. The
// kernel then neither copies the data into the cache nor has it left to write back when Commit
// syncs, and the caller fills the next chunk while the disk takes the last one. The tail that does
// not fill a chunk is written through the cache again. A filesystem that cannot do direct I/O
// (tmpfs, some FUSE mounts) keeps the cached writes.
//
// The figures below are those of Create; tests pass smaller ones in options.
const (
	defaultDirectAfter int64 = 8 << 20 // a multiple of directAlign
	defaultChunkSize         = 4 << 20 // a multiple of directAlign
)

// directAlign is the alignment of offsets, lengths and buffers that O_DIRECT needs: the logical
// block size of every common device divides it.
const directAlign = 4096

// direct is the O_DIRECT writer of one temporary file.
type direct struct {
	f    *os.File
	cur  []byte      // the chunk being filled
	full chan []byte // chunks for the goroutine to write
	free chan []byte // written chunks, to fill again
	done chan struct{}
	bufs [][]byte // every chunk, to release

	mu  sync.Mutex
	err error // the goroutine's first write error
}

// startDirect switches f, whose offset is aligned, to direct writes in chunks of chunkSize bytes
// (a multiple of directAlign). It returns nil, leaving f as it was, if the filesystem or the
// system cannot do them.
func startDirect(f *os.File, chunkSize int) *direct {
	const nbufs = 3
	d := &direct{f: f, full: make(chan []byte, nbufs), free: make(chan []byte, nbufs), done: make(chan struct{})}
	for range nbufs {
		b, err := alignedBuffer(chunkSize)
		if err != nil {
			d.release()
			return nil
		}
		d.bufs = append(d.bufs, b)
		d.free <- b[:0]
	}
	if setDirect(f, true) != nil {
		d.release()
		return nil
	}
	d.cur = <-d.free
	go d.run()
	return d
}

// run writes the chunks sent to it, in order, until full is closed. After an error it only
// hands the chunks back.
func (d *direct) run() {
	defer close(d.done)
	for b := range d.full {
		if d.failed() == nil {
			if err := d.writeChunk(b); err != nil {
				d.mu.Lock()
				d.err = err
				d.mu.Unlock()
			}
		}
		d.free <- b[:0]
	}
}

// writeChunk writes b at the file's offset. A direct write the kernel refuses (EINVAL: a device
// with larger blocks, or a short write at a size limit that left the offset unaligned) is
// written again through the cache, which also reports the limit's own error (EFBIG, ENOSPC).
func (d *direct) writeChunk(b []byte) error {
	n, err := d.f.Write(b)
	if errors.Is(err, syscall.EINVAL) {
		if err = setDirect(d.f, false); err == nil {
			_, err = d.f.Write(b[n:])
		}
	}
	return err
}

func (d *direct) failed() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

// write copies p into chunks, handing each full one to the goroutine. It returns the
// goroutine's first error, if there is one yet.
func (d *direct) write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		if err := d.failed(); err != nil {
			return n, err
		}
		c := copy(d.cur[len(d.cur):cap(d.cur)], p)
		d.cur = d.cur[:len(d.cur)+c]
		n += c
		p = p[c:]
		if len(d.cur) == cap(d.cur) {
			d.full <- d.cur
			d.cur = <-d.free
		}
	}
	return n, d.failed()
}

// finish waits for the chunks handed over and switches the file back to cached writes; with
// tail, it then writes the last, partial chunk through the cache. It releases the buffers and
// returns the first error.
func (d *direct) finish(tail bool) error {
	close(d.full)
	<-d.done
	err := d.err
	if err == nil {
		err = setDirect(d.f, false)
	}
	if err == nil && tail && len(d.cur) > 0 {
		_, err = d.f.Write(d.cur)
	}
	d.release()
	return err
}

// release frees the chunk buffers.
func (d *direct) release() {
	for _, b := range d.bufs {
		freeBuffer(b)
	}
	d.bufs, d.cur = nil, nil
}
