// gopeer function: a composition function served by grpc-go, as functions written with
// function-sdk-go are, for xfn's clients (xfn call, xfn render, xfn host) to
// call. It decodes each request with Go's protobuf runtime, strictly, and
// refuses one that holds fields the descriptors do not name, so what xfn
// encodes is checked by the implementation Go functions run; it answers with
// bytes Go's runtime encodes.
//
// The request's input field "mode" says what to answer:
//   - compose (the default): the request's desired state, plus a composed
//     resource "from-go" echoing the XR's spec, a Normal result and a TTL;
//   - require: asks for the ConfigMap "cm" on every call (as a function must:
//     Crossplane calls one that drops its requirements again, without the
//     answers), and composes "from-go" with its data once it is given;
//   - big: a response of input.bytes bytes (a status field padded);
//   - sleep: composes after input.ms milliseconds.
//
// It prints "listening <port>" once it listens. With -certs (tls.crt, tls.key,
// ca.crt) it requires and verifies client certificates, as function-sdk-go
// does; without, it serves plaintext (--insecure). With -v1beta1-only it
// answers v1 calls Unimplemented, as a function built for Crossplane
// 1.14-1.16 does.

package main

import (
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"
)

var files *protoregistry.Files

var betaOnly *bool

// runFunction is `gopeer function [flags]`.
func runFunction(args []string) {
	fs := flag.NewFlagSet("function", flag.ExitOnError)
	addr := fs.String("address", "127.0.0.1:0", "host:port to listen on")
	certs := fs.String("certs", "", "folder with tls.crt, tls.key and ca.crt; none: plaintext")
	fds := fs.String("fds", "", "FileDescriptorSet with RunFunctionRequest and RunFunctionResponse")
	betaOnly = fs.Bool("v1beta1-only", false, "serve only v1beta1, as functions built for Crossplane 1.14-1.16 do")
	if err := fs.Parse(args); err != nil {
		os.Exit(2)
	}

	files = descriptorSet(*fds)

	opts := []grpc.ServerOption{grpc.CustomCodec(raw{}), grpc.UnknownServiceHandler(handle)}
	if *certs != "" {
		pair, pool := loadCerts(*certs)
		// As function-sdk-go's MTLSCertificates.
		opts = append(opts, grpc.Creds(credentials.NewTLS(&tls.Config{
			MinVersion:   tls.VersionTLS12,
			Certificates: []tls.Certificate{pair},
			ClientCAs:    pool,
			ClientAuth:   tls.RequireAndVerifyClientCert,
		})))
	}
	lis, err := net.Listen("tcp", *addr)
	if err != nil {
		fail("%v", err)
	}
	fmt.Printf("listening %d\n", lis.Addr().(*net.TCPAddr).Port)
	if err := grpc.NewServer(opts...).Serve(lis); err != nil {
		fail("%v", err)
	}
}

func handle(_ interface{}, stream grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(stream)
	var api string
	switch method {
	case "/apiextensions.fn.proto.v1.FunctionRunnerService/RunFunction":
		if *betaOnly {
			// What grpc-go answers for a service it does not have.
			return status.Errorf(codes.Unimplemented, "unknown service apiextensions.fn.proto.v1.FunctionRunnerService")
		}
		api = "v1"
	case "/apiextensions.fn.proto.v1beta1.FunctionRunnerService/RunFunction":
		api = "v1beta1"
	default:
		return status.Errorf(codes.Unimplemented, "unknown method %s", method)
	}
	var in []byte
	if err := stream.RecvMsg(&in); err != nil {
		return err
	}
	req := dynamicpb.NewMessage(message(files, api, "RunFunctionRequest"))
	if err := (proto.UnmarshalOptions{}).Unmarshal(in, req); err != nil {
		return status.Errorf(codes.InvalidArgument, "go-function cannot decode the request: %v", err)
	}
	if unknown := unknownFields(req, "request"); len(unknown) > 0 {
		return status.Errorf(codes.InvalidArgument, "go-function: the request holds unknown fields at %s", strings.Join(unknown, ", "))
	}
	text, err := protojson.Marshal(req)
	if err != nil {
		return status.Errorf(codes.Internal, "protojson: %v", err)
	}
	var r map[string]interface{}
	if err := json.Unmarshal(text, &r); err != nil {
		return status.Errorf(codes.Internal, "%v", err)
	}
	rsp, err := respond(r)
	if err != nil {
		return err
	}
	out := dynamicpb.NewMessage(message(files, api, "RunFunctionResponse"))
	text, _ = json.Marshal(rsp)
	if err := protojson.Unmarshal(text, out); err != nil {
		return status.Errorf(codes.Internal, "go-function built a bad response: %v", err)
	}
	b, err := proto.Marshal(out)
	if err != nil {
		return status.Errorf(codes.Internal, "%v", err)
	}
	return stream.SendMsg(&b)
}

type obj = map[string]interface{}

func get(o obj, path ...string) interface{} {
	var v interface{} = o
	for _, k := range path {
		m, ok := v.(obj)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// respond builds the response, in protojson's form, from the request in protojson's form.
func respond(req obj) (obj, error) {
	input, _ := req["input"].(obj)
	mode, _ := get(input, "mode").(string)
	desired, _ := req["desired"].(obj)
	if desired == nil {
		desired = obj{}
	}
	resources, _ := desired["resources"].(obj)
	if resources == nil {
		resources = obj{}
	}
	desired["resources"] = resources
	meta := obj{"tag": get(req, "meta", "tag"), "ttl": "30s"}
	rsp := obj{"meta": meta, "desired": desired}
	compose := func(extra obj) {
		spec := obj{"echo": get(req, "observed", "composite", "resource", "spec")}
		for k, v := range extra {
			spec[k] = v
		}
		resources["from-go"] = obj{"resource": obj{"apiVersion": "example.org/v1", "kind": "GoThing", "spec": spec}, "ready": "READY_TRUE"}
		rsp["results"] = []interface{}{obj{"severity": "SEVERITY_NORMAL", "message": "composed by grpc-go", "reason": "Composed"}}
	}
	switch mode {
	case "", "compose":
		compose(nil)
	case "sleep":
		ms, _ := get(input, "ms").(float64)
		time.Sleep(time.Duration(ms) * time.Millisecond)
		compose(nil)
	case "require":
		items, _ := get(req, "requiredResources", "cm", "items").([]interface{})
		rsp["requirements"] = obj{"resources": obj{"cm": obj{"apiVersion": "v1", "kind": "ConfigMap", "matchName": "cm", "namespace": "default"}}}
		if len(items) == 0 {
			return rsp, nil
		}
		compose(obj{"fromConfigMap": get(items[0].(obj), "resource", "data")})
	case "big":
		n, _ := get(input, "bytes").(float64)
		composite, _ := desired["composite"].(obj)
		if composite == nil {
			composite = obj{}
		}
		composite["resource"] = obj{"status": obj{"pad": strings.Repeat("x", int(n))}}
		desired["composite"] = composite
	default:
		return nil, status.Errorf(codes.InvalidArgument, "unknown mode %q", mode)
	}
	return rsp, nil
}
