package boundedio

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadAllBound: exactly limit bytes are read; one more is refused, whatever the limit.
func TestReadAllBound(t *testing.T) {
	for _, limit := range []int64{0, 1, 7, 4 << 10, 1 << 20} {
		in := bytes.Repeat([]byte{'x'}, int(limit))
		b, err := ReadAll(bytes.NewReader(in), limit)
		require.NoError(t, err, "limit %d", limit)
		assert.Equal(t, in, b, "limit %d", limit)

		b, err = ReadAll(bytes.NewReader(append(in, 'y')), limit)
		var big *TooLargeError
		require.ErrorAs(t, err, &big, "limit %d", limit)
		assert.Equal(t, limit, big.Limit)
		assert.Nil(t, b)

		// One byte at a time: the bound does not rest on the reader's chunks.
		b, err = ReadAll(iotest.OneByteReader(bytes.NewReader(append(in, 'y'))), limit)
		require.ErrorAs(t, err, &big, "limit %d", limit)
		assert.Nil(t, b)
	}
	b, err := ReadAll(strings.NewReader("abc"), math.MaxInt64) // limit+1 would overflow
	require.NoError(t, err)
	assert.Equal(t, "abc", string(b))
	assert.Panics(t, func() { _, _ = ReadAll(strings.NewReader(""), -1) })
}

// TestReadAllError: a read error is returned as it is, and no data with it; one after the bound
// is not reached.
func TestReadAllError(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(boom))
	b, err := ReadAll(r, 10)
	assert.ErrorIs(t, err, boom)
	assert.Nil(t, b)
	assert.False(t, errors.As(err, new(*TooLargeError)))

	b, err = ReadAll(iotest.ErrReader(boom), 0)
	assert.ErrorIs(t, err, boom)
	assert.Nil(t, b)

	r = io.MultiReader(strings.NewReader("abcd"), iotest.ErrReader(boom))
	_, err = ReadAll(r, 3)
	assert.ErrorAs(t, err, new(*TooLargeError))
}

func TestTooLargeText(t *testing.T) {
	for _, c := range []struct {
		limit int64
		want  string
	}{
		{16 << 20, "larger than 16 MiB"},
		{1 << 20, "larger than 1 MiB"},
		{4 << 10, "larger than 4 KiB"},
		{3 << 30, "larger than 3 GiB"},
		{1 << 60, "larger than 1 EiB"},
		{1536, "larger than 1536 bytes"}, // 1.5 KiB: no unit divides it
		{(1 << 20) + (1 << 10), "larger than 1025 KiB"},
		{1000, "larger than 1000 bytes"},
		{1, "larger than 1 byte"},
		{0, "larger than 0 bytes"},
		{math.MaxInt64, "larger than 9223372036854775807 bytes"},
	} {
		e := &TooLargeError{Limit: c.limit}
		assert.Equal(t, c.want, e.Error(), "%d", c.limit)
		assert.Equal(t, strings.TrimPrefix(c.want, "larger than "), e.LimitText())
	}
}

// TestReadFile: a file at the bound is read, a device that never ends and a file past the bound
// are refused after limit+1 bytes, and opening or reading a directory fails as os says.
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	at := filepath.Join(dir, "at")
	require.NoError(t, os.WriteFile(at, bytes.Repeat([]byte{'x'}, 1<<10), 0o644))
	b, err := ReadFile(at, 1<<10)
	require.NoError(t, err)
	assert.Len(t, b, 1<<10)
	_, err = ReadFile(at, 1<<10-1)
	assert.EqualError(t, err, "larger than 1023 bytes")

	if _, err := os.Stat("/dev/zero"); err == nil {
		_, err = ReadFile("/dev/zero", 1<<20)
		assert.EqualError(t, err, "larger than 1 MiB")
	}

	_, err = ReadFile(filepath.Join(dir, "none"), 10)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.ErrorContains(t, err, filepath.Join(dir, "none"))

	_, err = ReadFile(dir, 10)
	require.Error(t, err)
	assert.False(t, errors.As(err, new(*TooLargeError)))
}
