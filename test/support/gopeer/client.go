// gopeer client: a RunFunction client made the way Crossplane makes its own (function_runner.go
// in crossplane's internal/xfn): grpc-go; mTLS from a folder laid out as
// Crossplane's client Secret (ca.crt, tls.crt, tls.key); the server's name taken
// from the target's authority, as Crossplane dials dns:///<fn>.<ns>:9443; and
// the service config round_robin with waitForReady on every method.
//
// Requests are sent as the bytes in the files given. Each answer is decoded by
// Go's protobuf runtime (the one Crossplane decodes with) against the
// descriptors in -fds: strictly (UTF-8 in strings, wire types), then every
// message is checked for unknown fields, and the result is printed as protojson.
// One JSON line per call on stdout. The exit code is 0 whatever the calls
// answered; 2 means the client itself could not run.

package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io/ioutil"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"
)

// Crossplane's client service config (svcConfig in function_runner.go).
const serviceConfig = `{"loadBalancingConfig":[{"round_robin":{}}],"methodConfig":[{"name":[{}],"waitForReady":true}]}`

type result struct {
	Index     int             `json:"i"`
	Code      string          `json:"code"`
	Message   string          `json:"message,omitempty"`
	Ms        float64         `json:"ms"`
	Bytes     int             `json:"bytes,omitempty"`
	Response  json.RawMessage `json:"response,omitempty"`
	DecodeErr string          `json:"decodeError,omitempty"`
	Unknown   []string        `json:"unknown,omitempty"`
	Health    string          `json:"health,omitempty"`
	StartedAt float64         `json:"startedAt"`
}

// runClient is `gopeer client [flags] <request files>`.
func runClient(args []string) {
	fs := flag.NewFlagSet("client", flag.ExitOnError)
	addrs := fs.String("addr", "", "comma-separated host:port the target resolves to")
	authority := fs.String("authority", "function-hello.crossplane-system:9443", "the authority Crossplane dials: <fn>.<ns>:9443")
	certs := fs.String("certs", "", "folder with ca.crt, tls.crt and tls.key (Crossplane's client Secret); none: insecure")
	api := fs.String("api", "v1", "v1 or v1beta1")
	timeout := fs.Duration("timeout", 60*time.Second, "per-call deadline (Crossplane's default step timeout is 60s)")
	fds := fs.String("fds", "", "FileDescriptorSet to decode answers with")
	repeat := fs.Int("n", 1, "send each request this many times")
	health := fs.Bool("health", false, "ask the health service instead")
	gap := fs.Duration("gap", 0, "wait this long before each call after the first, one at a time")
	outDir := fs.String("out", "", "folder to write each answer's bytes to, as <i>.bin")
	if err := fs.Parse(args); err != nil {
		os.Exit(2)
	}

	if *addrs == "" {
		fail("-addr is required")
	}
	var creds credentials.TransportCredentials
	if *certs != "" {
		pair, pool := loadCerts(*certs)
		// As crossplane-runtime's LoadMTLSConfig: no ServerName, TLS 1.2 or later.
		creds = credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, Certificates: []tls.Certificate{pair}})
	}

	r := manual.NewBuilderWithScheme("xfntest")
	var state resolver.State
	for _, a := range strings.Split(*addrs, ",") {
		state.Addresses = append(state.Addresses, resolver.Address{Addr: a})
	}
	r.InitialState(state)
	opts := []grpc.DialOption{grpc.WithResolvers(r), grpc.WithDefaultServiceConfig(serviceConfig)}
	if creds != nil {
		opts = append(opts, grpc.WithTransportCredentials(creds))
	} else {
		opts = append(opts, grpc.WithInsecure())
	}
	conn, err := grpc.Dial("xfntest:///"+*authority, opts...)
	if err != nil {
		fail("dial: %v", err)
	}
	defer conn.Close()

	t0 := time.Now()
	out := json.NewEncoder(os.Stdout)
	var mu sync.Mutex
	emit := func(res result) {
		mu.Lock()
		defer mu.Unlock()
		if err := out.Encode(res); err != nil {
			fail("%v", err)
		}
	}
	since := func(t time.Time) float64 { return float64(t.Sub(t0).Microseconds()) / 1000 }

	if *health {
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		defer cancel()
		start := time.Now()
		rsp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		res := result{Code: status.Code(err).String(), StartedAt: since(start)}
		if err != nil {
			res.Message = status.Convert(err).Message()
		} else {
			res.Health = rsp.GetStatus().String()
		}
		res.Ms = float64(time.Since(start).Microseconds()) / 1000
		emit(res)
		return
	}

	var files *protoregistry.Files
	var response protoreflect.MessageDescriptor
	if *fds != "" {
		files = descriptorSet(*fds)
		response = message(files, *api, "RunFunctionResponse")
	}
	method := fmt.Sprintf("/apiextensions.fn.proto.%s.FunctionRunnerService/RunFunction", *api)
	paths := fs.Args()
	if len(paths) == 0 {
		fail("give request files")
	}
	requests := make([][]byte, len(paths))
	for i, f := range paths {
		if requests[i], err = ioutil.ReadFile(f); err != nil {
			fail("%v", err)
		}
		// A request in protojson is encoded here, by Go's protobuf runtime, as Crossplane encodes its requests.
		if strings.HasSuffix(f, ".json") {
			if files == nil {
				fail("-fds is required to encode %s", f)
			}
			m := dynamicpb.NewMessage(message(files, *api, "RunFunctionRequest"))
			if err := protojson.Unmarshal(requests[i], m); err != nil {
				fail("%s: %v", f, err)
			}
			if requests[i], err = proto.Marshal(m); err != nil {
				fail("%s: %v", f, err)
			}
		}
	}

	call := func(i int, req []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		defer cancel()
		start := time.Now()
		var rsp []byte
		err := conn.Invoke(ctx, method, &req, &rsp, grpc.ForceCodec(raw{}))
		res := result{Index: i, Code: status.Code(err).String(), Ms: float64(time.Since(start).Microseconds()) / 1000, StartedAt: since(start)}
		if err != nil {
			res.Message = status.Convert(err).Message()
			emit(res)
			return
		}
		res.Bytes = len(rsp)
		if *outDir != "" {
			if err := ioutil.WriteFile(filepath.Join(*outDir, fmt.Sprintf("%d.bin", i)), rsp, 0o644); err != nil {
				fail("%v", err)
			}
		}
		if response != nil {
			m := dynamicpb.NewMessage(response)
			if err := (proto.UnmarshalOptions{}).Unmarshal(rsp, m); err != nil {
				res.DecodeErr = err.Error()
			} else {
				res.Unknown = unknownFields(m, string(response.FullName()))
				text, err := protojson.Marshal(m)
				if err != nil {
					res.DecodeErr = "protojson: " + err.Error()
				} else {
					res.Response = text
				}
			}
		}
		emit(res)
	}

	if *gap > 0 {
		k := 0
		for n := 0; n < *repeat; n++ {
			for _, req := range requests {
				if k > 0 {
					time.Sleep(*gap)
				}
				call(k, req)
				k++
			}
		}
		return
	}
	var wg sync.WaitGroup
	k := 0
	for n := 0; n < *repeat; n++ {
		for _, req := range requests {
			wg.Add(1)
			go func(i int, req []byte) {
				defer wg.Done()
				call(i, req)
			}(k, req)
			k++
		}
	}
	wg.Wait()
}
