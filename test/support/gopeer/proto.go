package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io/ioutil"
	"os"
	"path/filepath"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// raw carries message bytes as they are, under the default content type
// (application/grpc): as a client codec (Name) and a server codec (String).
type raw struct{}

func (raw) Marshal(v interface{}) ([]byte, error) { return *(v.(*[]byte)), nil }
func (raw) Unmarshal(data []byte, v interface{}) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}
func (raw) Name() string   { return "proto" }
func (raw) String() string { return "proto" }

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "gopeer: "+format+"\n", args...)
	os.Exit(2)
}

// loadCerts reads a folder laid out as a Kubernetes TLS Secret with its CA:
// tls.crt and tls.key (this side's pair) and ca.crt (the CA of the other side).
func loadCerts(dir string) (tls.Certificate, *x509.CertPool) {
	read := func(name string) []byte {
		b, err := ioutil.ReadFile(filepath.Join(dir, name))
		if err != nil {
			fail("%v", err)
		}
		return b
	}
	pair, err := tls.X509KeyPair(read("tls.crt"), read("tls.key"))
	if err != nil {
		fail("key pair in %s: %v", dir, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(read("ca.crt")) {
		fail("no certificate in %s", filepath.Join(dir, "ca.crt"))
	}
	return pair, pool
}

// descriptorSet reads a FileDescriptorSet.
func descriptorSet(path string) *protoregistry.Files {
	b, err := ioutil.ReadFile(path)
	if err != nil {
		fail("%v", err)
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(b, &set); err != nil {
		fail("descriptor set: %v", err)
	}
	files, err := protodesc.NewFiles(&set)
	if err != nil {
		fail("descriptor set: %v", err)
	}
	return files
}

// message finds apiextensions.fn.proto.<api>.<name> among files.
func message(files *protoregistry.Files, api, name string) protoreflect.MessageDescriptor {
	full := protoreflect.FullName("apiextensions.fn.proto." + api + "." + name)
	d, err := files.FindDescriptorByName(full)
	if err != nil {
		fail("%s: %v", full, err)
	}
	return d.(protoreflect.MessageDescriptor)
}

// unknownFields lists where m or any message inside it holds fields its descriptor does not name.
func unknownFields(m protoreflect.Message, at string) []string {
	var out []string
	if len(m.GetUnknown()) > 0 {
		out = append(out, at)
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		here := at + "." + string(fd.Name())
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() != nil {
				v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
					out = append(out, unknownFields(mv.Message(), here+"["+k.String()+"]")...)
					return true
				})
			}
		case fd.IsList():
			if fd.Message() != nil {
				l := v.List()
				for i := 0; i < l.Len(); i++ {
					out = append(out, unknownFields(l.Get(i).Message(), fmt.Sprintf("%s[%d]", here, i))...)
				}
			}
		case fd.Message() != nil:
			out = append(out, unknownFields(v.Message(), here)...)
		}
		return true
	})
	return out
}
