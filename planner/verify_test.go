package planner

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/coredag/coredag/dsl"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// loadPlan parses and elaborates a plan file without running Check, so tests can inspect or
// mutate the Graph before verifying it.
func loadPlan(t testing.TB, path string, params map[string]int64) *Graph {
	t.Helper()
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	f, err := dsl.Parse(path, src)
	require.NoError(t, err)
	g, err := Elaborate(f, params)
	require.NoError(t, err)
	return g
}

// planRanks are the world sizes every plan in plans/ must verify cleanly at; plans that need a
// power of two skip the others.
var planRanks = []int64{2, 3, 4, 8}

func planFiles(t testing.TB) []string {
	files, err := filepath.Glob("../plans/*.dag")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	return files
}

// elaborates reports whether the plan accepts the world size (recursive doubling needs a power of two).
func elaborates(path string, ranks int64) bool {
	src, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	f, err := dsl.Parse(path, src)
	if err != nil {
		return false
	}
	_, err = Elaborate(f, map[string]int64{"ranks": ranks})
	return err == nil
}

func TestVerifyPlansClean(t *testing.T) {
	for _, path := range planFiles(t) {
		for _, ranks := range planRanks {
			name := strings.TrimSuffix(filepath.Base(path), ".dag")
			t.Run(name+"/ranks="+strconv.FormatInt(ranks, 10), func(t *testing.T) {
				if !elaborates(path, ranks) {
					t.Skipf("%s does not support ranks=%d", name, ranks)
				}
				g := loadPlan(t, path, map[string]int64{"ranks": ranks})
				require.Empty(t, Verify(g), "plan %s at ranks=%d", name, ranks)
				require.Empty(t, Races(g))
			})
		}
	}
}

// chunkWant is one expected diagnostic of a chunked error file.
type chunkWant struct {
	line, col int // col 0: any column
	re        *regexp.Regexp
}

// runChunks checks a chunked error file (inputs separated by `---` lines, each expected error
// written as `### "regexp"` or `### COL "regexp"` at the end of its line). Each chunk is padded
// with blank lines so positions are those of the whole file. Every expected error must be
// reported and nothing else.
func runChunks(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(string(data), "\n")
	cases := 0
	for start := 0; start < len(lines); {
		end := start
		for end < len(lines) && strings.TrimSpace(lines[end]) != "---" {
			end++
		}
		var src strings.Builder
		var wants []chunkWant
		for i := 0; i < end; i++ {
			if i < start {
				src.WriteByte('\n')
				continue
			}
			line := lines[i]
			if j := strings.Index(line, "###"); j >= 0 {
				spec := strings.TrimSpace(line[j+3:])
				w := chunkWant{line: i + 1}
				if q := strings.IndexByte(spec, '"'); q > 0 {
					w.col, err = strconv.Atoi(strings.TrimSpace(spec[:q]))
					require.NoError(t, err, "%s:%d: bad column", path, i+1)
					spec = spec[q:]
				}
				require.True(t, len(spec) >= 2 && spec[0] == '"' && spec[len(spec)-1] == '"', "%s:%d: want ### \"regexp\"", path, i+1)
				w.re = regexp.MustCompile(spec[1 : len(spec)-1])
				wants = append(wants, w)
				line = line[:j]
			}
			src.WriteString(line)
			src.WriteByte('\n')
		}
		first := start + 1
		start = end + 1
		if len(wants) == 0 {
			continue
		}
		cases++
		errs := chunkErrors(t, path, []byte(src.String()))
		for _, w := range wants {
			found := false
			for i, e := range errs {
				if e != nil && e.Pos.Line == w.line && (w.col == 0 || e.Pos.Col == w.col) && w.re.MatchString(e.Msg) {
					errs[i] = nil
					found = true
					break
				}
			}
			assert.True(t, found, "%s:%d: no error matching %q (chunk at line %d); got:\n%s", path, w.line, w.re, first, listErrs(errs))
		}
		for _, e := range errs {
			assert.Nil(t, e, "%s: unexpected error %v", path, e)
		}
	}
	return cases
}

func chunkErrors(t *testing.T, path string, src []byte) []*dsl.Error {
	f, err := dsl.Parse(path, src)
	if err != nil {
		return errList(t, err)
	}
	g, err := Elaborate(f, nil)
	if err != nil {
		return errList(t, err)
	}
	return Verify(g)
}

func errList(t *testing.T, err error) []*dsl.Error {
	var list dsl.ErrorList
	if errors.As(err, &list) {
		return list
	}
	var e *dsl.Error
	require.True(t, errors.As(err, &e), "not a diagnostic: %v", err)
	return []*dsl.Error{e}
}

func listErrs(errs []*dsl.Error) string {
	var b strings.Builder
	for _, e := range errs {
		if e != nil {
			b.WriteString("\t" + e.Error() + "\n")
		}
	}
	return b.String()
}

func TestVerifyErrorFiles(t *testing.T) {
	total := 0
	for _, name := range []string{"cycles", "fifo", "races"} {
		t.Run(name, func(t *testing.T) {
			total += runChunks(t, filepath.Join("..", "testdata", "errors", name+".dag"))
		})
	}
	assert.GreaterOrEqual(t, total, 20, "error cases")
}
