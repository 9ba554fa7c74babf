// gopeer is Crossplane's side of the RunFunction API, made with the Go stack
// Crossplane and function-sdk-go use (grpc-go, Go's protobuf runtime), for
// xfn's tests: `gopeer client` calls a function as Crossplane does (client.go),
// `gopeer function` serves one as a Go function does (function.go), and
// `gopeer inspect` emits to a Pipeline Inspector as Crossplane does (inspect.go).
// Built by test/support/go.ts from Debian's grpc-go and protobuf packages
// (GOPATH mode, nothing downloaded).
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fail("usage: gopeer client|function|inspect [flags]")
	}
	switch os.Args[1] {
	case "client":
		runClient(os.Args[2:])
	case "function":
		runFunction(os.Args[2:])
	case "inspect":
		runInspect(os.Args[2:])
	default:
		fmt.Fprintf(os.Stderr, "gopeer: unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
}
