// gopeer inspect: Crossplane's side of the Pipeline Inspector API, made the way
// Crossplane's SocketPipelineInspector is (crossplane internal/xfn/inspected/
// socket.go at 2d040d2d): grpc-go dialled at unix://<socket> without TLS; for
// each step, the request with credentials, connection details and Secrets'
// data redacted to "**REDACTED**", marshalled with Go's protojson, sent by
// EmitRequest with its StepMeta; then the response (or the call's error) by
// EmitResponse with the same StepMeta; each emit given 100 ms.
//
// -steps is a JSON list: {"request": <protojson RunFunctionRequest>,
// "response": <protojson RunFunctionResponse or null>, "error": "...",
// "meta": {"traceId", "spanId", "stepIndex", "stepName", "functionName",
// "compositionName", "xr": {"apiVersion", "kind", "name", "namespace", "uid"}}}.
// One JSON line per emit on stdout: {"i", "method", "code", "ms"}.

package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io/ioutil"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"
)

const redacted = "**REDACTED**"

type inspectStep struct {
	Request  json.RawMessage `json:"request"`
	Response json.RawMessage `json:"response"`
	Error    string          `json:"error"`
	Meta     struct {
		TraceID         string `json:"traceId"`
		SpanID          string `json:"spanId"`
		StepIndex       int32  `json:"stepIndex"`
		StepName        string `json:"stepName"`
		FunctionName    string `json:"functionName"`
		CompositionName string `json:"compositionName"`
		XR              struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Name       string `json:"name"`
			Namespace  string `json:"namespace"`
			UID        string `json:"uid"`
		} `json:"xr"`
	} `json:"meta"`
}

type emitResult struct {
	Index  int     `json:"i"`
	Method string  `json:"method"`
	Code   string  `json:"code"`
	Ms     float64 `json:"ms"`
}

func runInspect(args []string) {
	fs := flag.NewFlagSet("inspect", flag.ExitOnError)
	socket := fs.String("socket", "", "the sidecar's Unix socket")
	fds := fs.String("fds", "", "FileDescriptorSet with the fn and pipeline inspector protos")
	stepsFile := fs.String("steps", "", "the steps to emit (JSON)")
	timeout := fs.Duration("timeout", 100*time.Millisecond, "per-emit deadline (Crossplane's defaultEmitTimeout)")
	if err := fs.Parse(args); err != nil {
		os.Exit(2)
	}
	files := descriptorSet(*fds)
	b, err := ioutil.ReadFile(*stepsFile)
	if err != nil {
		fail("%v", err)
	}
	var steps []inspectStep
	if err := json.Unmarshal(b, &steps); err != nil {
		fail("steps: %v", err)
	}
	// Connected first, as Crossplane's long-lived connection is: each emit's 100 ms is the answer's, not a dial's.
	dialCtx, dialCancel := context.WithTimeout(context.Background(), 10*time.Second)
	conn, err := grpc.DialContext(dialCtx, "unix://"+*socket, grpc.WithInsecure(), grpc.WithBlock())
	dialCancel()
	if err != nil {
		fail("dial: %v", err)
	}
	defer conn.Close()

	emit := func(i int, method string, m *dynamicpb.Message) {
		req, err := proto.Marshal(m)
		if err != nil {
			fail("marshal: %v", err)
		}
		var rsp []byte
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		start := time.Now()
		err = conn.Invoke(ctx, "/crossplane.pipeline.v1alpha1.PipelineInspectorService/"+method, &req, &rsp, grpc.ForceCodec(raw{}))
		cancel()
		line, _ := json.Marshal(emitResult{Index: i, Method: method, Code: status.Code(err).String(), Ms: float64(time.Since(start).Microseconds()) / 1000})
		fmt.Println(string(line))
	}

	for i, s := range steps {
		meta := stepMeta(files, s)
		req := dynamicpb.NewMessage(inspectorMessage(files, "EmitRequestRequest"))
		setField(req, "request", protoreflect.ValueOfBytes(sanitized(files, "RunFunctionRequest", s.Request)))
		setField(req, "meta", protoreflect.ValueOfMessage(meta))
		emit(i, "EmitRequest", req)

		rsp := dynamicpb.NewMessage(inspectorMessage(files, "EmitResponseRequest"))
		if len(s.Response) > 0 && string(s.Response) != "null" {
			setField(rsp, "response", protoreflect.ValueOfBytes(sanitized(files, "RunFunctionResponse", s.Response)))
		}
		setField(rsp, "error", protoreflect.ValueOfString(s.Error))
		setField(rsp, "meta", protoreflect.ValueOfMessage(meta))
		emit(i, "EmitResponse", rsp)
	}
}

func inspectorMessage(files *protoregistry.Files, name string) protoreflect.MessageDescriptor {
	d, err := files.FindDescriptorByName(protoreflect.FullName("crossplane.pipeline.v1alpha1." + name))
	if err != nil {
		fail("%s: %v", name, err)
	}
	return d.(protoreflect.MessageDescriptor)
}

func setField(m *dynamicpb.Message, name string, v protoreflect.Value) {
	fd := m.Descriptor().Fields().ByName(protoreflect.Name(name))
	if fd == nil {
		fail("no field %s in %s", name, m.Descriptor().FullName())
	}
	m.Set(fd, v)
}

// stepMeta is the StepMeta step.BuildMetadata makes for a composition's step.
func stepMeta(files *protoregistry.Files, s inspectStep) *dynamicpb.Message {
	m := dynamicpb.NewMessage(inspectorMessage(files, "StepMeta"))
	ts := dynamicpb.NewMessage(m.Descriptor().Fields().ByName("timestamp").Message())
	now := time.Now()
	setField(ts, "seconds", protoreflect.ValueOfInt64(now.Unix()))
	setField(ts, "nanos", protoreflect.ValueOfInt32(int32(now.Nanosecond())))
	setField(m, "timestamp", protoreflect.ValueOfMessage(ts))
	setField(m, "trace_id", protoreflect.ValueOfString(s.Meta.TraceID))
	setField(m, "span_id", protoreflect.ValueOfString(s.Meta.SpanID))
	setField(m, "step_index", protoreflect.ValueOfInt32(s.Meta.StepIndex))
	setField(m, "step_name", protoreflect.ValueOfString(s.Meta.StepName))
	setField(m, "iteration", protoreflect.ValueOfInt32(0))
	setField(m, "function_name", protoreflect.ValueOfString(s.Meta.FunctionName))
	c := dynamicpb.NewMessage(inspectorMessage(files, "CompositionMeta"))
	setField(c, "composition_name", protoreflect.ValueOfString(s.Meta.CompositionName))
	setField(c, "composite_resource_uid", protoreflect.ValueOfString(s.Meta.XR.UID))
	setField(c, "composite_resource_name", protoreflect.ValueOfString(s.Meta.XR.Name))
	setField(c, "composite_resource_namespace", protoreflect.ValueOfString(s.Meta.XR.Namespace))
	setField(c, "composite_resource_api_version", protoreflect.ValueOfString(s.Meta.XR.APIVersion))
	setField(c, "composite_resource_kind", protoreflect.ValueOfString(s.Meta.XR.Kind))
	setField(m, "composition_meta", protoreflect.ValueOfMessage(c))
	return m
}

// sanitized reads a message from protojson with Go's runtime, prints it with Go's protojson, and
// redacts it as Crossplane's sanitizeState, redactCredentials and stripSecretData do.
func sanitized(files *protoregistry.Files, name string, in []byte) []byte {
	m := dynamicpb.NewMessage(message(files, "v1", name))
	if err := (protojson.UnmarshalOptions{Resolver: resolverFor(files)}).Unmarshal(in, m); err != nil {
		fail("%s: %v", name, err)
	}
	out, err := (protojson.MarshalOptions{Resolver: resolverFor(files)}).Marshal(m)
	if err != nil {
		fail("%s: %v", name, err)
	}
	var v map[string]interface{}
	if err := json.Unmarshal(out, &v); err != nil {
		fail("%s: %v", name, err)
	}
	b64 := base64.StdEncoding.EncodeToString([]byte(redacted))
	redactMap := func(x interface{}) {
		if mm, ok := x.(map[string]interface{}); ok {
			for k := range mm {
				mm[k] = b64
			}
		}
	}
	stripSecret := func(x interface{}) {
		r, ok := x.(map[string]interface{})
		if !ok || r["apiVersion"] != "v1" || r["kind"] != "Secret" {
			return
		}
		for _, f := range []string{"data", "stringData"} {
			if d, ok := r[f].(map[string]interface{}); ok {
				for k := range d {
					d[k] = redacted
				}
			}
		}
	}
	obj := func(x interface{}) map[string]interface{} {
		if mm, ok := x.(map[string]interface{}); ok {
			return mm
		}
		return map[string]interface{}{}
	}
	for _, c := range obj(v["credentials"]) {
		redactMap(obj(obj(c)["credentialData"])["data"])
	}
	for _, st := range []string{"observed", "desired"} {
		state := obj(v[st])
		redactMap(obj(state["composite"])["connectionDetails"])
		for _, r := range obj(state["resources"]) {
			redactMap(obj(r)["connectionDetails"])
			stripSecret(obj(r)["resource"])
		}
	}
	for _, field := range []string{"requiredResources", "extraResources"} {
		for _, rs := range obj(v[field]) {
			items, _ := obj(rs)["items"].([]interface{})
			for _, it := range items {
				redactMap(obj(it)["connectionDetails"])
				stripSecret(obj(it)["resource"])
			}
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		fail("%s: %v", name, err)
	}
	return b
}

// resolverFor is a type resolver over files (for protojson's google.protobuf types).
func resolverFor(files *protoregistry.Files) *protoregistry.Types {
	types := new(protoregistry.Types)
	files.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		msgs := fd.Messages()
		for i := 0; i < msgs.Len(); i++ {
			_ = types.RegisterMessage(dynamicpb.NewMessageType(msgs.Get(i)))
		}
		return true
	})
	return types
}
