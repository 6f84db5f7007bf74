package archtest

import (
	"bufio"
	"bytes"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

const module = "github.com/coredag/coredag"

// rule says what a package (and with a trailing "/...", its subpackages) must not depend on,
// directly or not. With only set, it may depend on nothing of the project but those packages.
type rule struct {
	pkg    string
	forbid []string // packages, or trees ending in "/..."
	only   []string // when non-nil: the only project packages allowed
	why    string
}

var bottom = []string{"diag", "wait", "internal/decimal"}

// layers are the project's packages above the utilities, which the utilities must not import.
var layers = []string{"dsl", "ir", "planner", "planner/...", "exec", "exec/...", "listing", "viz", "msccl", "predict", "planset", "simgrid", "cmd/..."}

// top are the packages no rule constrains: the command line, the library (the module's root
// package) and its C ABI, which put every layer together.
var top = []string{"cmd/coredag", "", "cmd/libcoredag"}

// tagSets are the build tag combinations the rules are checked under: the providers on real
// NICs are built only with their tags, and must keep the rules then too.
var tagSets = []string{"", "verbs", "ofi", "ofi,verbs"}

var rules = []rule{
	{pkg: "diag", only: []string{}, why: "diag is the bottom package"},
	{pkg: "wait", only: []string{}, why: "wait is a bottom package"},
	{pkg: "internal/decimal", only: []string{}, why: "number formatting is a bottom package"},
	{pkg: "ir", only: bottom, why: "the IR is plain data over the bottom packages"},
	{pkg: "exec/nic", only: bottom, why: "the NIC contract imports only bottom packages"},
	{pkg: "exec/softnic", forbid: []string{"dsl", "planner", "planner/...", "ir", "exec"}, why: "a NIC provider knows only the contract"},
	{pkg: "exec/verbs", forbid: []string{"dsl", "planner", "planner/...", "ir", "exec"}, why: "a NIC provider knows only the contract"},
	{pkg: "exec/ofi", forbid: []string{"dsl", "planner", "planner/...", "ir", "exec"}, why: "a NIC provider knows only the contract"},
	{pkg: "exec/provider", forbid: []string{"dsl", "planner", "planner/...", "ir", "exec", "viz", "listing", "msccl"}, why: "the provider table knows only the NIC contract and the providers"},
	{pkg: "exec", forbid: []string{"dsl", "planner", "planner/...", "viz", "listing", "msccl"}, why: "the engines run a compiled ir.Plan"},
	{pkg: "exec/bootstrap", forbid: []string{"dsl", "planner", "planner/...", "viz", "listing", "msccl", "exec/softnic", "exec/verbs", "exec/ofi"}, why: "the rendezvous of a run serves every provider"},
	{pkg: "dsl", forbid: []string{"ir", "wait", "planner", "planner/...", "exec", "exec/...", "listing", "viz", "msccl"}, why: "syntax knows nothing of what a plan becomes"},
	{pkg: "msccl", forbid: []string{"planner", "planner/...", "exec", "exec/...", "listing", "viz"}, why: "MSCCL-IR is a front end: it writes syntax and reads a Graph"},
	{pkg: "viz", forbid: []string{"exec", "exec/...", "dsl", "planner", "planner/..."}, why: "outputs read the IR only"},
	{pkg: "listing", forbid: []string{"exec", "exec/...", "dsl", "planner", "planner/..."}, why: "outputs read the IR only"},
	{pkg: "planner/...", forbid: []string{"exec", "exec/...", "viz", "listing"}, why: "the passes do not run or draw plans"},
	{pkg: "planner", forbid: []string{"exec", "exec/...", "viz", "listing"}, why: "the passes do not run or draw plans"},
	{pkg: "planner/elaborate", forbid: []string{"planner", "planner/verify", "planner/lower"}, why: "elaboration is the first pass"},
	{pkg: "planner/elaborate/internal/arena", only: []string{}, why: "the elaborator's allocation tactics know nothing of plans"},
	{pkg: "planner/verify", forbid: []string{"dsl", "planner", "planner/elaborate", "planner/lower"}, why: "verification reads a Graph"},
	{pkg: "planner/prove", forbid: []string{"dsl", "planner", "planner/elaborate", "planner/lower"}, why: "the proof reads a Graph and verify's order"},
	{pkg: "planner/lower", forbid: []string{"dsl", "planner", "planner/elaborate", "planner/verify"}, why: "lowering reads a Graph"},
	{pkg: "planner/replay", forbid: []string{"dsl", "planner", "planner/elaborate", "planner/verify", "planner/lower"}, why: "replay checks a compiled Plan"},
	{pkg: "predict", only: []string{"ir", "wait", "diag", "internal/decimal", "internal/minheap", "internal/boundedio", "internal/stop"}, why: "the cost model simulates a compiled ir.Plan"},
	{pkg: "simgrid", only: []string{"ir", "predict", "wait", "diag", "internal/decimal", "internal/minheap", "internal/boundedio", "internal/stop"}, why: "the SimGrid run reads a Graph and the cost model's figures"},
	{pkg: "planset", only: []string{"ir", "wait", "diag", "internal/decimal", "internal/intlit", "internal/boundedio", "internal/stop"}, why: "a plan set is read and checked through the caller's front end"},
	{pkg: "internal/atomicfile", forbid: layers, why: "a utility"},
	{pkg: "internal/boundedio", only: []string{}, why: "a utility"},
	{pkg: "internal/budget", forbid: layers, why: "a utility"},
	{pkg: "internal/english", forbid: layers, why: "a utility"},
	{pkg: "internal/intlit", forbid: layers, why: "a utility"},
	{pkg: "internal/race", only: []string{}, why: "a utility"},
	{pkg: "internal/minheap", only: []string{}, why: "a utility"},
	{pkg: "internal/stop", only: []string{}, why: "a utility"},
	{pkg: "internal/e2e", only: []string{}, why: "a utility"},
	{pkg: "internal/view", only: []string{}, why: "a utility"},
	{pkg: "internal/archtest", only: []string{}, why: "the layering test reads go list only"},
	{pkg: "internal/chunktest", only: bottom, why: "a test helper over the bottom packages"},
	{pkg: "internal/drawtest", only: bottom, why: "a test helper over the bottom packages"},
	{pkg: "internal/stoptest", only: []string{}, why: "a test helper"},
	{pkg: "internal/netnstest", only: []string{}, why: "a test helper: network namespaces as hosts"},
	{pkg: "internal/nictest", forbid: []string{"dsl", "planner", "planner/...", "ir", "exec", "exec/softnic", "exec/verbs", "exec/ofi"}, why: "the contract tests know only the contract"},
	{pkg: "internal/randgraph", forbid: []string{"dsl", "planner", "planner/...", "exec", "exec/...", "listing", "viz", "msccl"}, why: "random Graphs are built without the front end"},
	{pkg: "internal/ringbench", forbid: []string{"listing", "viz", "cmd/..."}, why: "the benchmark compiles and runs, it does not draw"},
}

// listed holds what deps found for each tag set, shared by the tests: each `go list` of the
// module takes a second of CPU.
var listed struct {
	sync.Mutex
	deps map[string]map[string][]string
}

// deps lists every project package (without the module prefix) with its project dependencies,
// as `go list -deps` sees them under the given build tags (tests excluded).
func deps(t *testing.T, tags string) map[string][]string {
	t.Helper()
	listed.Lock()
	defer listed.Unlock()
	if m, ok := listed.deps[tags]; ok {
		return m
	}
	args := []string{"list", "-f", `{{.ImportPath}} {{join .Deps " "}}`}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	cmd := exec.Command("go", append(args, module+"/...")...)
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	m := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		pkg := strings.TrimPrefix(strings.TrimPrefix(f[0], module), "/")
		var ds []string
		for _, d := range f[1:] {
			if d == module || strings.HasPrefix(d, module+"/") {
				ds = append(ds, strings.TrimPrefix(strings.TrimPrefix(d, module), "/"))
			}
		}
		m[pkg] = ds
	}
	if listed.deps == nil {
		listed.deps = map[string]map[string][]string{}
	}
	listed.deps[tags] = m
	return m
}

// matches reports whether pkg is pattern or, for "x/...", lies under x.
func matches(pattern, pkg string) bool {
	if tree, ok := strings.CutSuffix(pattern, "/..."); ok {
		return strings.HasPrefix(pkg, tree+"/")
	}
	return pattern == pkg
}

func TestLayering(t *testing.T) {
	t.Parallel()
	for _, tags := range tagSets {
		all := deps(t, tags)
		for _, r := range rules {
			found := false
			for pkg, ds := range all {
				if !matches(r.pkg, pkg) {
					continue
				}
				found = true
				for _, d := range ds {
					bad := false
					if r.only != nil {
						bad = true
						for _, ok := range r.only {
							bad = bad && !matches(ok, d)
						}
					}
					for _, f := range r.forbid {
						bad = bad || matches(f, d)
					}
					if bad {
						t.Errorf("tags %q: %s depends on %s: %s", tags, pkg, d, r.why)
					}
				}
			}
			if !found {
				t.Errorf("rule for %s matches no package: update the rules", r.pkg)
			}
		}
	}
}

// Every package, under every tag set, is constrained by a rule or named in top: a new package
// gets its place in the layering when it is added.
func TestEveryPackageHasARule(t *testing.T) {
	t.Parallel()
	for _, tags := range tagSets {
		for pkg := range deps(t, tags) {
			covered := false
			for _, r := range rules {
				covered = covered || matches(r.pkg, pkg)
			}
			for _, p := range top {
				covered = covered || matches(p, pkg)
			}
			if !covered {
				t.Errorf("tags %q: no rule says what %s may depend on: add one to rules (or the package to top)", tags, pkg)
			}
		}
	}
}

// TestRuleMatching checks the pattern helper the rules rely on.
func TestRuleMatching(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		pattern, pkg string
		want         bool
	}{{"exec", "exec", true}, {"exec", "exec/nic", false}, {"exec/...", "exec/nic", true}, {"exec/...", "exec", false}, {"planner/...", "planner2/x", false}} {
		if got := matches(c.pattern, c.pkg); got != c.want {
			t.Errorf("matches(%q, %q) = %v", c.pattern, c.pkg, got)
		}
	}
}
