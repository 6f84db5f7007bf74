package dsl_test

import (
	"fmt"
	"os"

	"github.com/coredag/coredag/diag"
	"github.com/coredag/coredag/dsl"
)

func ExampleParse() {
	src := []byte(`plan ping
param ranks = 2
buffer msg u8[64]
queue link to 1 - rank
op tx = send link msg
op rx = recv link msg after tx
`)
	f, err := dsl.Parse("ping.dag", src)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, st := range f.Stmts {
		if op, ok := st.(*dsl.OpStmt); ok {
			fmt.Printf("%s: op %s is a %T\n", op.Pos(), op.Name.Ident.Name, op.Op)
		}
	}

	// A syntax error is a diag.List; diag.Print quotes the line and puts a caret under the column.
	bad := []byte("plan ping\nop tx = send link msg inline notify\n")
	_, err = dsl.Parse("bad.dag", bad)
	diag.Print(os.Stdout, err, diag.Sources{"bad.dag": bad})
	// Output:
	// ping.dag:5:1: op tx is a *dsl.SendOp
	// ping.dag:6:1: op rx is a *dsl.RecvOp
	// bad.dag:2:30: unexpected "notify" after the send operation: put each statement on its own line or separate statements with ";"
	//     op tx = send link msg inline notify
	//                                  ^
}

func ExampleFormat() {
	src := []byte(`plan   tidy
param ranks=2 ; param n=4KiB
buffer data u32[n]   remote_write
queue right to (rank+1)%ranks
op put=write right data[0:n/2] to data[n/2:n]    # one half to the right neighbour
`)
	f, err := dsl.Parse("tidy.dag", src)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(string(dsl.Format(f)))
	// Output:
	// plan tidy
	// param ranks = 2
	// param n     = 4KiB
	// buffer data u32[n] remote_write
	// queue right to (rank + 1) % ranks
	// op put = write right data[0 : n / 2] to data[n / 2 : n] # one half to the right neighbour
}
