// Package decimal appends integers as decimal text, as strconv.AppendInt and AppendUint do in
// base 10, but writes the digits straight into the destination: no scratch buffer to copy out
// of, which is most of the cost of a short number. The listing of a large plan writes tens of
// millions of them.
package decimal

import "math/bits"

// AppendUint appends the decimal text of v to dst.
func AppendUint(dst []byte, v uint64) []byte {
	if v < 100 { // most numbers of a listing
		if v < 10 {
			return append(dst, byte('0'+v))
		}
		return append(dst, pairs[2*v], pairs[2*v+1])
	}
	n := Len(v)
	if cap(dst)-len(dst) < n {
		dst = append(dst, make([]byte, n)...)[:len(dst)]
	}
	dst = dst[:len(dst)+n]
	out := dst[len(dst)-n:]
	i := n
	for v >= 100 {
		q := v / 100
		d := (v - q*100) * 2
		i -= 2
		out[i], out[i+1] = pairs[d], pairs[d+1]
		v = q
	}
	if v >= 10 {
		out[1], out[0] = pairs[2*v+1], pairs[2*v]
	} else {
		out[0] = byte('0' + v)
	}
	return dst
}

// AppendInt appends the decimal text of v to dst, with a leading '-' if it is negative.
func AppendInt(dst []byte, v int64) []byte {
	u := uint64(v)
	if v < 0 {
		dst = append(dst, '-')
		u = -u
	}
	return AppendUint(dst, u)
}

// Len is the number of digits of v in decimal.
func Len(v uint64) int {
	t := bits.Len64(v|1) * 1233 >> 12 // log10(2) is about 1233/4096: t is log10(v) or one less
	if v|1 < pow10[t] {               // v|1: 0 has one digit, and no power of 10 but 1 is odd
		return t
	}
	return t + 1
}

var pow10 = [...]uint64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19}

// pairs is the text of 00 to 99.
const pairs = "00010203040506070809" +
	"10111213141516171819" +
	"20212223242526272829" +
	"30313233343536373839" +
	"40414243444546474849" +
	"50515253545556575859" +
	"60616263646566676869" +
	"70717273747576777879" +
	"80818283848586878889" +
	"90919293949596979899"
