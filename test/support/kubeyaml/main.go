// kubeyaml reads YAML as Kubernetes does: sigs.k8s.io/yaml's YAMLToJSON (go-yaml
// v2's YAML 1.1 resolution), which kubectl's decoder, kube-apiserver's apply
// patches and crossplane's CLI all read manifests with. The oracle of
// test/engine/kubeyaml.test.ts: standard input is a JSON list of YAML texts;
// standard output a JSON list of {"json": <the text as JSON>} or {"error": "..."}.
package main

import (
	"encoding/json"
	"io"
	"os"

	"sigs.k8s.io/yaml"
)

type answer struct {
	JSON  json.RawMessage `json:"json,omitempty"`
	Error string          `json:"error,omitempty"`
}

func main() {
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		panic(err)
	}
	var texts []string
	if err := json.Unmarshal(in, &texts); err != nil {
		panic(err)
	}
	out := make([]answer, len(texts))
	for i, t := range texts {
		j, err := yaml.YAMLToJSON([]byte(t))
		if err != nil {
			out[i] = answer{Error: err.Error()}
			continue
		}
		out[i] = answer{JSON: j}
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		panic(err)
	}
}
