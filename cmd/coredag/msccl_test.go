package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An MSCCL-IR algorithm is a plan for every command: check proves the postcondition of its coll,
// compile lowers it for connectx and triggered, run runs it on the triggered target with both
// engines and checks the postcondition on the values.
func TestMSCCLCommands(t *testing.T) {
	t.Parallel()
	const xml = "testdata/msccl/ring_allreduce_4.xml"
	code, stdout, stderr := coredag(t, "", "check", xml)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, xml+": ok (plan ring_allreduce_4_1, 4 ranks, 72 ops, 1 postcondition proven)")

	for _, target := range []string{"connectx", "triggered"} {
		code, stdout, stderr = coredag(t, "", "compile", "--target", target, xml)
		require.Equal(t, exitOK, code, "%s: %s", target, stderr)
		assert.Contains(t, stdout, "plan ring_allreduce_4_1  target "+target+" ")
		assert.Contains(t, stdout, "ring_allreduce_4.xml:5") // ops name their <step>
	}
	for _, engine := range []string{"offload", "poll"} {
		code, stdout, stderr = coredag(t, "", "run", "--engine", engine, "--target", "triggered", "--iters", "2", "-p", "chunk=16", xml)
		require.Equal(t, exitOK, code, "%s: %s%s", engine, stdout, stderr)
		assert.Contains(t, stdout, "PASS "+xml+": memory matches the reference on every rank (4 ranks)")
		assert.Contains(t, stdout, engine+" engine, target triggered, softnic, 2 iterations")
		assert.Contains(t, stdout, "held: expect allreduce sum data")
	}
}

// A wrong algorithm is refused by check at the coll attribute, with the missing contribution and
// the step that last wrote the wrong element.
func TestMSCCLCheckRefuses(t *testing.T) {
	t.Parallel()
	const xml = "testdata/msccl/bad_expect.xml"
	code, _, stderr := coredag(t, "", "check", xml)
	assert.Equal(t, exitFail, code)
	assert.Contains(t, stderr, xml+":2:105: expect reduce_scatter sum output from input: output[64] on rank 1 should hold the sum over ranks 0-2 of input[64], but holds the sum over ranks 1, 2 of input[64] — rank 0's contribution is missing")
	assert.Contains(t, stderr, "    "+xml+":14:7: output[64] on rank 1 was last written by red[0,2] on rank 1")
}

// import prints the postcondition; export without --coll takes the collective back from it.
func TestMSCCLImportExport(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dag := filepath.Join(dir, "ring.dag")
	code, _, stderr := coredag(t, "", "import", "msccl", "-o", dag, "testdata/msccl/ring_allreduce_4.xml")
	require.Equal(t, exitOK, code, stderr)
	text, err := os.ReadFile(dag)
	require.NoError(t, err)
	assert.Contains(t, string(text), "\n# ring_allreduce_4.xml:2: what coll=\"allreduce\" inplace=1 promise; `coredag check` proves it.\nexpect allreduce sum data\n")

	code, stdout, stderr := coredag(t, "", "export", "msccl", dag)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, `coll="allreduce" inplace="1" outofplace="0"`)
	code, stdout, stderr = coredag(t, "", "export", "msccl", "--coll", "custom", dag)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, `coll="custom" inplace="1"`)
}

// Hostile values crossing into XML or plan text stay values: export escapes --coll (refusing
// what XML cannot hold), import quotes coll in the plan's comments; a Latin-1 file is refused in
// words, not with the XML decoder's names.
func TestMSCCLHostileValues(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dag := filepath.Join(dir, "ring.dag")
	code, _, stderr := coredag(t, "", "import", "msccl", "-o", dag, "testdata/msccl/ring_allreduce_4.xml")
	require.Equal(t, exitOK, code, stderr)
	code, stdout, stderr := coredag(t, "", "export", "msccl", "--coll", `x" evil="1`, dag)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, ` coll="x&#34; evil=&#34;1" `)
	requireWellFormedXML(t, []byte(stdout))
	code, stdout, stderr = coredag(t, "", "export", "msccl", "--coll", "a\x01b", dag)
	assert.Equal(t, exitFail, code)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, `coll "a\x01b" holds U+0001, which XML cannot hold`)

	src, err := os.ReadFile("../../testdata/msccl/ring_allreduce_4.xml")
	require.NoError(t, err)
	xml := filepath.Join(dir, "evil.xml")
	require.NoError(t, os.WriteFile(xml, []byte(strings.Replace(string(src), `proto="Simple"`, `proto="Simple&#10;plan pwned"`, 1)), 0o644))
	code, stdout, stderr = coredag(t, "", "import", "msccl", xml)
	require.Equal(t, exitOK, code, stderr)
	assert.NotContains(t, stdout, "\nplan pwned")
	assert.Contains(t, stdout, `proto="Simple\nplan pwned"`)

	latin := filepath.Join(dir, "latin.xml")
	require.NoError(t, os.WriteFile(latin, append([]byte(`<?xml version="1.0" encoding="ISO-8859-1"?>`+"\n"), src...), 0o644))
	code, _, stderr = coredag(t, "", "import", "msccl", latin)
	assert.Equal(t, exitFail, code)
	assert.Contains(t, stderr, latin+`:1:21: the XML declares encoding "ISO-8859-1": coredag reads UTF-8 only`)
	assert.NotContains(t, stderr, "CharsetReader")
}
