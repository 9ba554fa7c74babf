//go:build js && wasm

// kubecel is Kubernetes' own CEL for CRD rules, compiled to WebAssembly: the
// oracle the embedded API server's rule engine is compared with (issue 59), and
// the third engine bench/cel-engines.ts measures. It is built from
// k8s.io/apiextensions-apiserver at the staging version of the Kubernetes that
// test/anchors/versions.json pins (scripts/anchors.mjs, anchor "kubecel").
// Three functions are set on the JavaScript global object:
//
//	xfnCelEval(expr, bindingsJSON) -> the value as a canonical string, "refused: ..." (it does not compile) or "error: ..." (it fails)
//	xfnCelCompileCRD(crdJSON) -> JSON list of the field errors a CRD is refused with
//	xfnCelValidate(key, crdJSON, version, objJSON[, oldJSON]) -> JSON list of the rules' field errors
//
// xfnCelEval compiles expr in the environment CRD rules get (the base
// environment set at the default compatibility version, NewExpressions), with
// each binding (a CEL literal, by name) declared dyn. Its canonical form is
// test/support/celspec.ts's: int(3), uint(3), double(1.5), string("a"),
// bytes(6162), [..], {k:v, sorted}, type(int), timestamp(ISO, ms), duration(s),
// optional, null. xfnCelValidate compiles a CRD version's rules once per key.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"syscall/js"
	"time"
	_ "time/tzdata" // WebAssembly has no zoneinfo to read: getHours('US/Central') needs the zones built in

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuralcel "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	kjson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

type ferr struct {
	Type   string `json:"type"`
	Field  string `json:"field"`
	Detail string `json:"detail"`
	Error  string `json:"error"`
}

func out(errs field.ErrorList) string {
	r := make([]ferr, 0, len(errs))
	for _, e := range errs {
		r = append(r, ferr{string(e.Type), e.Field, e.Detail, e.Error()})
	}
	b, _ := json.Marshal(r)
	return string(b)
}

func failed(kind string, err error) string {
	b, _ := json.Marshal([]ferr{{Type: kind, Error: err.Error()}})
	return string(b)
}

func internalCRD(s string) (*apiextensionsinternal.CustomResourceDefinition, error) {
	v1 := &apiextensionsv1.CustomResourceDefinition{}
	if err := json.Unmarshal([]byte(s), v1); err != nil {
		return nil, err
	}
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(v1)
	in := &apiextensionsinternal.CustomResourceDefinition{}
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(v1, in, nil); err != nil {
		return nil, err
	}
	return in, nil
}

var (
	validators  = map[string]*structuralcel.Validator{}
	structurals = map[string]*schema.Structural{}
	base        *cel.Env
)

func compileCRD(_ js.Value, args []js.Value) any {
	in, err := internalCRD(args[0].String())
	if err != nil {
		return failed("decode", err)
	}
	return out(validation.ValidateCustomResourceDefinition(context.Background(), in))
}

func validate(_ js.Value, args []js.Value) any {
	key := args[0].String()
	v, ok := validators[key]
	s := structurals[key]
	if !ok {
		in, err := internalCRD(args[1].String())
		if err != nil {
			return failed("decode", err)
		}
		var props *apiextensionsinternal.JSONSchemaProps
		for _, ver := range in.Spec.Versions {
			if ver.Name == args[2].String() && ver.Schema != nil {
				props = ver.Schema.OpenAPIV3Schema
			}
		}
		if props == nil && in.Spec.Validation != nil {
			props = in.Spec.Validation.OpenAPIV3Schema
		}
		if s, err = schema.NewStructural(props); err != nil {
			return failed("structural", err)
		}
		v = structuralcel.NewValidator(s, true, celconfig.PerCallLimit)
		validators[key], structurals[key] = v, s
	}
	if v == nil {
		return "[]"
	}
	var obj, old any
	if err := kjson.Unmarshal([]byte(args[3].String()), &obj); err != nil {
		return failed("decode", err)
	}
	if len(args) > 4 && args[4].Type() == js.TypeString {
		if err := kjson.Unmarshal([]byte(args[4].String()), &old); err != nil {
			return failed("decode", err)
		}
	}
	errs, _ := v.Validate(context.Background(), nil, s, obj, old, celconfig.RuntimeCELCostBudget)
	return out(errs)
}

// refusal is an expression the environment will not compile: a CRD with it as a rule is refused.
type refusal struct{ error }

// run compiles and evaluates text in env with vars bound.
func run(env *cel.Env, text string, vars map[string]any) (ref.Val, error) {
	ast, iss := env.Compile(text)
	if iss.Err() != nil {
		return nil, refusal{iss.Err()}
	}
	prg, err := env.Program(ast, cel.CostLimit(celconfig.PerCallLimit))
	if err != nil {
		return nil, refusal{err}
	}
	v, _, err := prg.Eval(vars)
	return v, err
}

func eval(_ js.Value, args []js.Value) any {
	if base == nil {
		base = environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).NewExpressionsEnv()
	}
	literals := map[string]string{}
	if err := json.Unmarshal([]byte(args[1].String()), &literals); err != nil {
		return "error: bindings: " + err.Error()
	}
	env, vars := base, map[string]any{}
	for name, lit := range literals {
		v, err := run(base, lit, nil)
		if err != nil {
			return "error: binding " + name + ": " + err.Error()
		}
		vars[name] = v
		var err2 error
		if env, err2 = env.Extend(cel.Variable(name, cel.DynType)); err2 != nil {
			return "error: " + err2.Error()
		}
	}
	v, err := run(env, args[0].String(), vars)
	if r, ok := err.(refusal); ok {
		return "refused: " + r.Error()
	}
	if err != nil {
		return "error: " + err.Error()
	}
	return canonical(v)
}

// jsonText is s as JSON.stringify writes it (no HTML escaping).
func jsonText(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// number is a double as JavaScript's String(n) writes it (encoding/json uses the same rules).
func number(d float64) string {
	switch {
	case math.IsNaN(d):
		return "NaN"
	case math.IsInf(d, 1):
		return "Infinity"
	case math.IsInf(d, -1):
		return "-Infinity"
	case d == 0:
		return "0"
	}
	b, _ := json.Marshal(d)
	return string(b)
}

func canonical(v ref.Val) string {
	switch x := v.(type) {
	case types.Int:
		return fmt.Sprintf("int(%d)", int64(x))
	case types.Uint:
		return fmt.Sprintf("uint(%d)", uint64(x))
	case types.Double:
		return "double(" + number(float64(x)) + ")"
	case types.String:
		return "string(" + jsonText(string(x)) + ")"
	case types.Bytes:
		return fmt.Sprintf("bytes(%x)", []byte(x))
	case types.Bool:
		return fmt.Sprintf("bool(%t)", bool(x))
	case types.Null:
		return "null"
	case types.Timestamp:
		return "timestamp(" + x.Time.UTC().Format("2006-01-02T15:04:05.000Z") + ")"
	case types.Duration:
		return "duration(" + number(float64(x.Duration)/float64(time.Second)) + ")"
	case *types.Optional:
		return "optional"
	case ref.Type:
		return "type(" + x.TypeName() + ")"
	}
	if l, ok := v.(traits.Lister); ok {
		parts := []string{}
		for it := l.Iterator(); it.HasNext() == types.True; {
			parts = append(parts, canonical(it.Next()))
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	if m, ok := v.(traits.Mapper); ok {
		parts := []string{}
		for it := m.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			parts = append(parts, canonical(k)+":"+canonical(m.Get(k)))
		}
		sort.Strings(parts)
		return "{" + strings.Join(parts, ",") + "}"
	}
	return "unknown(" + v.Type().TypeName() + ")"
}

func main() {
	js.Global().Set("xfnCelEval", js.FuncOf(eval))
	js.Global().Set("xfnCelCompileCRD", js.FuncOf(compileCRD))
	js.Global().Set("xfnCelValidate", js.FuncOf(validate))
	select {}
}
