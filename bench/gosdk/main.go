// The bench function written with github.com/crossplane/function-sdk-go, as
// a function author writes one: the SDK's request and response helpers and
// its composed-resource type, served by the SDK's function.Serve. It does what
// the other bench servers do (bench/composed.ts): compose N resources from
// the XR, check each observed spec still holds what it composes, keep
// external names, mark readiness from the Ready condition. Built by
// scripts/anchors.mjs (anchor gosdkbench) against the pinned SDK.
//
//	gosdkbench -address 127.0.0.1:PORT
//
// It prints "listening <port>" once its port answers. Plaintext, as the other bench servers.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"reflect"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/crossplane/function-sdk-go"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	"github.com/crossplane/function-sdk-go/response"
)

const ext = "crossplane.io/external-name"

type benchFunction struct {
	fnv1.UnimplementedFunctionRunnerServiceServer
}

// desired is what the function composes for resource i (bench/composed.ts).
func desired(spec map[string]any, i int) map[string]any {
	return map[string]any{
		"apiVersion": "ec2.aws.upbound.io/v1beta1",
		"kind":       "Instance",
		"metadata": map[string]any{
			"labels": map[string]any{
				"bench.xfn.dev/index": fmt.Sprint(i),
				"bench.xfn.dev/team":  fmt.Sprint(spec["team"]),
			},
		},
		"spec": map[string]any{
			"forProvider": map[string]any{
				"region":       spec["region"],
				"instanceType": "t3.medium",
				"ami":          fmt.Sprintf("ami-%08d", i),
				"tags":         spec["tags"],
				"rootBlockDevice": []any{
					map[string]any{"volumeSize": float64(20 + i%10), "volumeType": "gp3", "encrypted": true},
				},
				"userData": spec["userData"],
			},
			"providerConfigRef": map[string]any{"name": "default"},
		},
	}
}

// holds tells whether seen carries every value want sets (src/sdk/holds.ts).
func holds(seen, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		s, ok := seen.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range w {
			if !holds(s[k], v) {
				return false
			}
		}
		return true
	case []any:
		s, ok := seen.([]any)
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

func (f *benchFunction) RunFunction(_ context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	rsp := response.To(req, time.Minute)
	xr, err := request.GetObservedCompositeResource(req)
	if err != nil {
		response.Fatal(rsp, err)
		return rsp, nil
	}
	spec, _ := xr.Resource.Object["spec"].(map[string]any)
	n, _ := xr.Resource.GetInteger("spec.count")
	observed, err := request.GetObservedComposedResources(req)
	if err != nil {
		response.Fatal(rsp, err)
		return rsp, nil
	}
	out, err := request.GetDesiredComposedResources(req)
	if err != nil {
		response.Fatal(rsp, err)
		return rsp, nil
	}
	names := map[string]any{}
	drifted := 0
	for i := 0; i < int(n); i++ {
		key := resource.Name(fmt.Sprintf("instance-%d", i))
		cd := composed.New()
		cd.Object = desired(spec, i)
		ready := resource.ReadyFalse
		if o, ok := observed[key]; ok {
			if s, ok := o.Resource.Object["spec"]; ok && !holds(s, cd.Object["spec"]) {
				drifted++
			}
			if name := o.Resource.GetAnnotations()[ext]; name != "" {
				names[string(key)] = name
				cd.SetAnnotations(map[string]string{ext: name})
			}
			if o.Resource.GetCondition(xpv2.TypeReady).Status == "True" {
				ready = resource.ReadyTrue
			}
		}
		out[key] = &resource.DesiredComposed{Resource: cd, Ready: ready}
	}
	if err := response.SetDesiredComposedResources(rsp, out); err != nil {
		response.Fatal(rsp, err)
		return rsp, nil
	}
	dxr, err := request.GetDesiredCompositeResource(req)
	if err != nil {
		response.Fatal(rsp, err)
		return rsp, nil
	}
	dxr.Resource.Object["status"] = map[string]any{"externalNames": names, "drifted": drifted}
	if err := response.SetDesiredCompositeResource(rsp, dxr); err != nil {
		response.Fatal(rsp, err)
	}
	return rsp, nil
}

func main() {
	addr := flag.String("address", "127.0.0.1:0", "host:port to listen on")
	flag.Parse()
	go func() {
		// function.Serve blocks; say "listening" once the port takes a connection.
		for {
			if c, err := net.Dial("tcp", *addr); err == nil {
				c.Close()
				_, port, _ := net.SplitHostPort(*addr)
				fmt.Printf("listening %s\n", port)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	// 8 MiB, as the other bench servers accept (the large request is 3.9 MiB).
	if err := function.Serve(&benchFunction{}, function.Listen("tcp", *addr), function.Insecure(true), function.MaxRecvMessageSize(8<<20)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
