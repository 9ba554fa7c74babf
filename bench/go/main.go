// The bench function in Go, built the way function-sdk-go builds a function:
// grpc-go serving the FunctionRunnerService with types protoc-gen-go and
// protoc-gen-go-grpc generated from proto/fn/v1/run_function.proto, and the
// resources taken to and from plain maps with structpb (AsMap, NewStruct),
// as a function reads and writes unstructured objects. It does what the other
// bench servers do (bench/composed.ts): compose N resources from the XR,
// check each observed spec still holds what it composes, keep external names,
// mark readiness from the Ready condition.
//
//	gofunction -address 127.0.0.1:PORT
//
// It prints "listening <port>" once it listens. Plaintext, as the other bench servers.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"reflect"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	fnv1 "xfnbench/fnv1"
)

const ext = "crossplane.io/external-name"

// codec is grpc-go's "proto" codec as grpc-go 1.35 and later have it, on
// google.golang.org/protobuf. Debian's grpc-go is 1.33, whose codec goes
// through the older github.com/golang/protobuf and cannot read types that
// today's protoc-gen-go generates; function-sdk-go runs on a current grpc-go.
type codec struct{}

func (codec) Marshal(v interface{}) ([]byte, error)      { return proto.Marshal(v.(proto.Message)) }
func (codec) Unmarshal(data []byte, v interface{}) error { return proto.Unmarshal(data, v.(proto.Message)) }
func (codec) Name() string                               { return "proto" }

func init() { encoding.RegisterCodec(codec{}) }

type function struct {
	fnv1.UnimplementedFunctionRunnerServiceServer
}

// composed is what the function composes for resource i (bench/composed.ts).
func composed(spec map[string]interface{}, i int) map[string]interface{} {
	return map[string]interface{}{
		"apiVersion": "ec2.aws.upbound.io/v1beta1",
		"kind":       "Instance",
		"metadata": map[string]interface{}{
			"labels": map[string]interface{}{
				"bench.xfn.dev/index": fmt.Sprint(i),
				"bench.xfn.dev/team":  fmt.Sprint(spec["team"]),
			},
		},
		"spec": map[string]interface{}{
			"forProvider": map[string]interface{}{
				"region":       spec["region"],
				"instanceType": "t3.medium",
				"ami":          fmt.Sprintf("ami-%08d", i),
				"tags":         spec["tags"],
				"rootBlockDevice": []interface{}{
					map[string]interface{}{"volumeSize": float64(20 + i%10), "volumeType": "gp3", "encrypted": true},
				},
				"userData": spec["userData"],
			},
			"providerConfigRef": map[string]interface{}{"name": "default"},
		},
	}
}

// holds tells whether seen carries every value want sets (src/sdk/holds.ts).
func holds(seen, want interface{}) bool {
	switch w := want.(type) {
	case map[string]interface{}:
		s, ok := seen.(map[string]interface{})
		if !ok {
			return false
		}
		for k, v := range w {
			if !holds(s[k], v) {
				return false
			}
		}
		return true
	case []interface{}:
		s, ok := seen.([]interface{})
		if !ok || len(s) != len(w) {
			return false
		}
		for i := range w {
			if !holds(s[i], w[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(seen, want)
	}
}

func object(v interface{}) map[string]interface{} {
	m, _ := v.(map[string]interface{})
	return m
}

func ready(seen map[string]interface{}) bool {
	conditions, _ := object(seen["status"])["conditions"].([]interface{})
	for _, c := range conditions {
		if m := object(c); m["type"] == "Ready" && m["status"] == "True" {
			return true
		}
	}
	return false
}

func (f *function) RunFunction(_ context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	// As function-sdk-go's response.To: the desired state so far, the context, a TTL.
	rsp := &fnv1.RunFunctionResponse{
		Meta:    &fnv1.ResponseMeta{Tag: req.GetMeta().GetTag(), Ttl: durationpb.New(time.Minute)},
		Desired: req.GetDesired(),
		Context: req.GetContext(),
	}
	if rsp.Desired == nil {
		rsp.Desired = &fnv1.State{}
	}
	if rsp.Desired.Resources == nil {
		rsp.Desired.Resources = map[string]*fnv1.Resource{}
	}
	xr := req.GetObserved().GetComposite().GetResource().AsMap()
	spec := object(xr["spec"])
	n, _ := spec["count"].(float64)
	observed := req.GetObserved().GetResources()
	names := map[string]interface{}{}
	drifted := 0
	for i := 0; i < int(n); i++ {
		key := fmt.Sprintf("instance-%d", i)
		obj := composed(spec, i)
		r := fnv1.Ready_READY_FALSE
		if o, ok := observed[key]; ok {
			seen := o.GetResource().AsMap()
			if s, ok := seen["spec"]; ok && !holds(s, obj["spec"]) {
				drifted++
			}
			if name, _ := object(object(seen["metadata"])["annotations"])[ext].(string); name != "" {
				names[key] = name
				object(obj["metadata"])["annotations"] = map[string]interface{}{ext: name}
			}
			if ready(seen) {
				r = fnv1.Ready_READY_TRUE
			}
		}
		s, err := structpb.NewStruct(obj)
		if err != nil {
			return nil, err
		}
		rsp.Desired.Resources[key] = &fnv1.Resource{Resource: s, Ready: r}
	}
	status, err := structpb.NewStruct(map[string]interface{}{"externalNames": names, "drifted": drifted})
	if err != nil {
		return nil, err
	}
	rsp.Desired.Composite = &fnv1.Resource{Resource: &structpb.Struct{Fields: map[string]*structpb.Value{"status": structpb.NewStructValue(status)}}}
	return rsp, nil
}

func main() {
	addr := flag.String("address", "127.0.0.1:0", "host:port to listen on")
	flag.Parse()
	lis, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("listening %d\n", lis.Addr().(*net.TCPAddr).Port)
	// 8 MiB, as the other bench servers accept (the large request is 3.9 MiB; grpc-go's default is 4).
	s := grpc.NewServer(grpc.MaxRecvMsgSize(8 << 20))
	fnv1.RegisterFunctionRunnerServiceServer(s, &function{})
	if err := s.Serve(lis); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
