//go:build unix

package boundedio

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadFileFIFO: a pipe is read until its writer closes it, and one whose writer never stops
// is refused at the bound.
func TestReadFileFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fifo")
	require.NoError(t, syscall.Mkfifo(path, 0o600))
	write := func(forever bool) chan struct{} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			w, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Error(err)
				return
			}
			defer w.Close()
			chunk := bytes.Repeat([]byte{'x'}, 4<<10)
			for _, err := w.Write(chunk); forever && err == nil; _, err = w.Write(chunk) {
			}
		}()
		return done
	}

	done := write(false)
	b, err := ReadFile(path, 4<<10)
	require.NoError(t, err)
	assert.Len(t, b, 4<<10)
	<-done

	done = write(true) // stops when ReadFile closes its end (EPIPE)
	_, err = ReadFile(path, 64<<10)
	assert.EqualError(t, err, "larger than 64 KiB")
	<-done
}
