// Package budget holds the memory budget of a coredag command: how many bytes it may allocate,
// where that figure came from, and how a figure is printed. A command works out what it will
// need before it allocates (the buffers of every rank, latency samples, timeline events) and
// refuses with the figure when it would not fit, instead of dying in the Go runtime.
//
// The budget comes from the caller's own setting (a Knob: the command's --mem, the library's
// option), else from the environment variable COREDAG_MEM, else from the machine: 80% of the least of the memory the kernel says is available (MemAvailable in
// /proc/meminfo), what the cgroup's memory limit leaves, and what the address-space limit
// (ulimit -v) leaves; where none of these can be read, Fallback.
package budget

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/internal/intlit"
)

// EnvVar names the environment variable that sets the budget when the caller's own setting (a
// Knob) is not given.
const EnvVar = "COREDAG_MEM"

// Knob is a caller's own setting of the budget, as messages name it and as a hint writes it.
type Knob struct {
	// Name names the setting, e.g. "--mem"; EnvVar for a caller that has none but the
	// environment.
	Name string
	// Form writes the setting of a figure, e.g. "--mem %[1]s": %[1]s is the figure as Parse
	// reads it ("18KiB"), %[2]s the same in bytes ("18432"), for a setting that takes a plain
	// integer. Use the explicit indexes: both are always passed.
	Form string
}

// Flag is the commands' --mem, the knob of a Budget that names none.
var Flag = Knob{Name: "--mem", Form: "--mem %[1]s"}

// Env is the knob of a caller that has no setting of its own: only COREDAG_MEM sets the budget.
var Env = Knob{Name: EnvVar, Form: EnvVar + "=%[1]s"}

// Fallback is the budget where the machine's memory cannot be read.
const Fallback = 4 << 30

// share is the part of the machine's free memory a command takes as its budget, in percent: the
// figures compared with it count what coredag keeps, and the Go runtime needs room to collect
// what it discards.
const share = 80

// Budget is a number of bytes a command may allocate and where the number came from.
type Budget struct {
	Bytes int64
	// From is the knob's name or EnvVar when the user set it, else how the machine's figure
	// was read (for example "80% of MemAvailable").
	From string
	// Knob is how the caller sets the budget, for messages; the zero Knob is Flag.
	Knob Knob
	// Asked, when positive, is what the user set, which Bytes lowers to what the address-space
	// limit (ulimit -v) leaves: an allocation past that limit fails whatever the budget says.
	Asked int64
}

// knob is b's Knob, Flag when it names none.
func (b Budget) knob() Knob {
	if b.Knob.Name == "" {
		return Flag
	}
	return b.Knob
}

// FromUser reports whether the budget was set with the caller's knob or the environment.
func (b Budget) FromUser() bool { return b.From == b.knob().Name || b.From == EnvVar }

// Source says, for a message, how the budget was set or can be set.
func (b Budget) Source() string {
	if b.Asked > 0 {
		return fmt.Sprintf("%s %s, lowered to %s", b.From, Format(b.Asked), addressLeft)
	}
	if b.FromUser() {
		return "set with " + b.From
	}
	return "set with " + b.settings()
}

// settings names what sets the budget: "--mem or COREDAG_MEM".
func (b Budget) settings() string {
	if k := b.knob(); k.Name != EnvVar {
		return k.Name + " or " + EnvVar
	}
	return EnvVar
}

// addressLeft is how a budget lowered for the address-space limit is described.
const addressLeft = "80% of what the address-space limit (ulimit -v) leaves"

// Note, when the budget was lowered (Asked), says so, for a command to print as a note.
func (b Budget) Note() string {
	if b.Asked <= 0 {
		return ""
	}
	return fmt.Sprintf("%s asks for %s, more than the address-space limit (ulimit -v) leaves: the memory budget is %s, %s",
		b.From, Format(b.Asked), Format(b.Bytes), addressLeft)
}

// Resolve returns the budget: value (the setting of knob k, such as --mem's) when not empty, else
// the environment variable EnvVar read with getenv, else the machine's (Machine).
// A figure from the user is lowered to what the address-space limit leaves (Asked, Note).
// A budget of 0 bytes, where the machine leaves nothing (an address space already at ulimit -v,
// a cgroup at its limit), is an error that says so: the budget it returns is never 0 bytes, which
// would read as no budget at all.
func Resolve(k Knob, value string, getenv func(string) string) (Budget, error) {
	return resolve(k, value, getenv, machine())
}

// resolve is Resolve on the machine s.
func resolve(k Knob, value string, getenv func(string) string, s system) (Budget, error) {
	user := func(set Knob, v string) (Budget, error) {
		n, err := Parse(v)
		if err != nil {
			return Budget{}, fmt.Errorf("%s: %v", fmt.Sprintf(set.Form, v, v), err)
		}
		b := Budget{Bytes: n, From: set.Name}
		if room, ok := s.addressRoom(); ok && room < n {
			b.Bytes, b.Asked = room, n
		}
		return b, nil
	}
	var b Budget
	var err error
	switch v := getenv(EnvVar); {
	case value != "":
		b, err = user(k, value)
	case v != "":
		b, err = user(Env, v)
	default:
		b = s.budget()
	}
	b.Knob = k
	if err == nil && b.Bytes <= 0 {
		return Budget{}, s.exhausted(b)
	}
	return b, err
}

// Parse reads a size such as 8GiB, 512MiB, 1_000_000 or 0x1000 (the integer literals of the
// language, with KiB, MiB, GiB or TiB); it must be positive.
func Parse(s string) (int64, error) {
	n, err := intlit.Parse(strings.ReplaceAll(strings.TrimSpace(s), " ", ""))
	if err != nil {
		return 0, fmt.Errorf("%v (write a size such as 8GiB or 512MiB)", err)
	}
	if n <= 0 {
		return 0, fmt.Errorf("the memory budget must be positive (write a size such as 8GiB or 512MiB)")
	}
	return n, nil
}

// Setting says how to ask for a budget of n bytes, for a hint: with the knob ("--mem 18KiB"),
// or "COREDAG_MEM=18KiB" when b comes from the environment, n written as Parse reads it, in
// the largest unit that divides it. It is "" when b was lowered for the address-space limit
// (Asked), which a larger figure does not lift.
func (b Budget) Setting(n int64) string {
	if b.Asked > 0 {
		return ""
	}
	k := b.knob()
	if b.From == EnvVar {
		k = Env
	}
	return fmt.Sprintf(k.Form, intlit.Format(n), strconv.FormatInt(n, 10))
}

// Format prints n bytes with a binary unit and at most three significant digits: "512 bytes",
// "4 KiB", "1.5 GiB", "32 GiB". Saturated figures (math.MaxInt64, see Mul) print as
// "more than 8 EiB".
func Format(n int64) string {
	if n == math.MaxInt64 {
		return "more than 8 EiB"
	}
	if n < 1024 {
		if n == 1 {
			return "1 byte"
		}
		return strconv.FormatInt(n, 10) + " bytes"
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v := float64(n)
	i := -1
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	var s string
	switch {
	case v >= 100:
		s = strconv.FormatFloat(math.Round(v), 'f', -1, 64)
	case v >= 10:
		s = strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64)
	default:
		s = strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
	}
	if s == "1024" && i < len(units)-1 { // 1023.9 MiB rounds to 1 GiB
		s, i = "1", i+1
	}
	return s + " " + units[i]
}

// Mul returns a*b for non-negative a and b, or math.MaxInt64 when the product overflows.
func Mul(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

// Add returns the sum of non-negative terms, or math.MaxInt64 when it overflows.
func Add(terms ...int64) int64 {
	var s int64
	for _, t := range terms {
		if t > math.MaxInt64-s {
			return math.MaxInt64
		}
		s += t
	}
	return s
}

// Error is a refusal: what was asked needs more memory than the budget.
type Error struct {
	// Pos, when valid, is where the figure comes from in the plan (a buffer declaration).
	Pos    diag.Pos
	Need   int64
	Budget Budget
	// What says what needs the memory, with the figure and how it is made up, e.g. "buffers need
	// 64 GiB in this process (4 ranks × 8 GiB on the software NIC, plus the reference copy)".
	What string
	// Hint, when set, says what to change besides the budget, e.g. "use fewer --iters".
	Hint string
}

// Message is the refusal without its position.
func (e *Error) Message() string {
	size := Format(e.Budget.Bytes)
	if n := e.Budget.Bytes; n > 1<<10 && n < 1<<20 && n%(1<<10) != 0 {
		// A small budget a person typed, which Format rounds: 2047 bytes would read as 2 KiB,
		// the size of one op.
		size += fmt.Sprintf(" (%d bytes)", n)
	}
	msg := fmt.Sprintf("%s; the memory budget is %s (%s)", e.What, size, e.Budget.Source())
	if e.Hint != "" {
		msg += ": " + e.Hint
	}
	return msg
}

// Error returns the refusal as an error, with pos (a plan position: the error prints it first)
// or without (a zero Pos).
func (e *Error) Error() string {
	if e.Pos.IsValid() {
		return e.Pos.String() + ": " + e.Message()
	}
	return e.Message()
}

// Check returns an *Error when need exceeds the budget, nil otherwise. what describes the need
// with its figure; hint, which may be empty, what to change.
func (b Budget) Check(need int64, what, hint string) error {
	if need <= b.Bytes {
		return nil
	}
	return &Error{Need: need, Budget: b, What: what, Hint: hint}
}
