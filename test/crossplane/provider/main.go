// Command provider is the test provider of xfn's real-Crossplane tier: two
// cluster-scoped managed resource kinds reconciled by crossplane-runtime's
// managed reconciler (management policies, late-init, external-name
// initialisation, finalizers, the create-pending/succeeded annotations), over
// a fake cloud kept in a folder, so its state outlives the provider process.
//
//   - Bucket (s3.aws.upbound.io/v1beta1): the external name is the object's
//     name (crossplane-runtime's NameAsExternalName initialiser), as for S3.
//   - Instance (rds.aws.upbound.io/v1beta1): the cloud assigns the ID, and the
//     provider learns it after Create returns (an asynchronous create); it is
//     set as the external name on the next Observe and, as in the provider
//     story of xfn's failure mode 4, persisted only through late-init. A
//     provider restarted before that forgets the ID.
//
// The fake cloud is the folder given by --state:
//
//	objects/<Kind>/<id>.json    one cloud resource: id, token (the MR's uid), params, createdAt,
//	                            and an Instance's password (its connection details: endpoint, password)
//	ops.log                     one line per cloud call: "<op> <Kind> <id> <token>"
//	fail-<op>                   while present, every <op> (observe, create, update, delete) fails with its text
//	slow                        while present, every cloud call first sleeps its text's seconds
//	crash-after-create          taken (removed) by the next create, which then ends the process
//	                            after the cloud made the resource and before Create returns
//
// A resource is "creating" for --ready-after after it is made, then
// "available". The cloud fills forProvider keys it has defaults for
// (Bucket storageClass, Instance engineVersion) when the create leaves them
// out: late-init's material.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Spec is a managed resource's spec: Crossplane's common fields and free-form parameters.
type Spec struct {
	xpv2.ClusterManagedResourceSpec `json:",inline"`
	ForProvider                     map[string]any `json:"forProvider,omitempty"`
}

// Status is a managed resource's status: conditions and what the cloud reports.
type Status struct {
	xpv2.ManagedResourceStatus `json:",inline"`
	AtProvider                 map[string]any `json:"atProvider,omitempty"`
}

// Resource is what both kinds hold.
type Resource struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              Spec   `json:"spec"`
	Status            Status `json:"status,omitempty"`
}

func (r *Resource) GetCondition(ct xpv2.ConditionType) xpv2.Condition {
	return r.Status.GetCondition(ct)
}
func (r *Resource) SetConditions(c ...xpv2.Condition) { r.Status.SetConditions(c...) }
func (r *Resource) GetManagementPolicies() xpv2.ManagementPolicies {
	return r.Spec.ManagementPolicies
}
func (r *Resource) SetManagementPolicies(p xpv2.ManagementPolicies) { r.Spec.ManagementPolicies = p }
func (r *Resource) GetDeletionPolicy() xpv2.DeletionPolicy          { return r.Spec.DeletionPolicy }
func (r *Resource) SetDeletionPolicy(p xpv2.DeletionPolicy)         { r.Spec.DeletionPolicy = p }
func (r *Resource) GetProviderConfigReference() *xpv2.Reference {
	return r.Spec.ProviderConfigReference
}
func (r *Resource) SetProviderConfigReference(p *xpv2.Reference) { r.Spec.ProviderConfigReference = p }
func (r *Resource) GetWriteConnectionSecretToReference() *xpv2.SecretReference {
	return r.Spec.WriteConnectionSecretToReference
}
func (r *Resource) SetWriteConnectionSecretToReference(s *xpv2.SecretReference) {
	r.Spec.WriteConnectionSecretToReference = s
}
func (r *Resource) SetObservedGeneration(g int64) { r.Status.SetObservedGeneration(g) }
func (r *Resource) GetObservedGeneration() int64  { return r.Status.GetObservedGeneration() }

// copyJSON deep-copies in into out through JSON (a test provider's objects are small).
func copyJSON(in, out any) {
	b, err := json.Marshal(in)
	if err == nil {
		err = json.Unmarshal(b, out)
	}
	if err != nil {
		panic(fmt.Sprintf("cannot copy %T: %v", in, err))
	}
}

// Bucket is the first kind: its external name is its name.
type Bucket struct {
	Resource `json:",inline"`
}

func (b *Bucket) DeepCopyObject() runtime.Object { out := &Bucket{}; copyJSON(b, out); return out }

// BucketList lists Buckets.
type BucketList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Bucket `json:"items"`
}

func (l *BucketList) DeepCopyObject() runtime.Object {
	out := &BucketList{}
	copyJSON(l, out)
	return out
}

// Instance is the second kind: the cloud names it, and the name arrives late.
type Instance struct {
	Resource `json:",inline"`
}

func (i *Instance) DeepCopyObject() runtime.Object { out := &Instance{}; copyJSON(i, out); return out }

// InstanceList lists Instances.
type InstanceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Instance `json:"items"`
}

func (l *InstanceList) DeepCopyObject() runtime.Object {
	out := &InstanceList{}
	copyJSON(l, out)
	return out
}

var (
	bucketKind   = schema.GroupVersionKind{Group: "s3.aws.upbound.io", Version: "v1beta1", Kind: "Bucket"}
	instanceKind = schema.GroupVersionKind{Group: "rds.aws.upbound.io", Version: "v1beta1", Kind: "Instance"}
	// defaults are what the cloud fills in when a create leaves them out.
	defaults = map[string]map[string]any{"Bucket": {"storageClass": "STANDARD"}, "Instance": {"engineVersion": "16.4"}}
)

// cloudObject is one resource of the fake cloud.
type cloudObject struct {
	ID        string         `json:"id"`
	Token     string         `json:"token"`
	Params    map[string]any `json:"params"`
	CreatedAt time.Time      `json:"createdAt"`
	// Password is an Instance's, made by the cloud at create: a connection
	// detail, published to spec.writeConnectionSecretToRef's Secret.
	Password string `json:"password,omitempty"`
}

// cloud is the fake external API: a folder whose state outlives the provider.
type cloud struct {
	dir        string
	readyAfter time.Duration
	mu         sync.Mutex
}

// call applies the folder's switches to one cloud call: slow first, then fail-<op>.
func (c *cloud) call(op string) error {
	if b, err := os.ReadFile(filepath.Join(c.dir, "slow")); err == nil {
		s, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
		if err != nil {
			return fmt.Errorf("the cloud's slow switch holds %q, not a number of seconds", strings.TrimSpace(string(b)))
		}
		time.Sleep(time.Duration(s * float64(time.Second)))
	}
	if b, err := os.ReadFile(filepath.Join(c.dir, "fail-"+op)); err == nil {
		return fmt.Errorf("cloud: %s refused: %s", op, strings.TrimSpace(string(b)))
	}
	return nil
}

func (c *cloud) path(kind, id string) string {
	return filepath.Join(c.dir, "objects", kind, id+".json")
}

// log appends one line to ops.log; the tests count cloud calls there.
func (c *cloud) log(op, kind, id, token string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, err := os.OpenFile(filepath.Join(c.dir, "ops.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %s %s %s\n", op, kind, id, token)
}

func (c *cloud) get(kind, id string) (*cloudObject, error) {
	if id == "" || strings.ContainsAny(id, "/\\") || id == "." || id == ".." {
		return nil, nil
	}
	b, err := os.ReadFile(c.path(kind, id))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	o := &cloudObject{}
	return o, json.Unmarshal(b, o)
}

// put writes o whole or not at all (a crash mid-write leaves the old state).
func (c *cloud) put(kind string, o *cloudObject) error {
	if err := os.MkdirAll(filepath.Dir(c.path(kind, o.ID)), 0o755); err != nil {
		return err
	}
	b, err := json.Marshal(o)
	if err != nil {
		return err
	}
	tmp := c.path(kind, o.ID) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, c.path(kind, o.ID))
}

// external is the ExternalClient for one kind.
type external struct {
	cloud *cloud
	kind  string
	// cloudNamed: the cloud assigns the ID, learned after Create returns.
	cloudNamed bool
	// learned holds IDs created but not yet seen by Observe, by MR uid: the
	// provider's memory, lost when it restarts.
	learned *sync.Map
}

func (e *external) Connect(_ context.Context, _ resource.Managed) (managed.ExternalClient, error) {
	return e, nil
}

func (e *external) Disconnect(_ context.Context) error { return nil }

func res(mg resource.Managed) *Resource {
	switch o := mg.(type) {
	case *Bucket:
		return &o.Resource
	case *Instance:
		return &o.Resource
	}
	panic(fmt.Sprintf("not a managed resource of this provider: %T", mg))
}

func (e *external) Observe(_ context.Context, mg resource.Managed) (managed.ExternalObservation, error) {
	if err := e.cloud.call("observe"); err != nil {
		return managed.ExternalObservation{}, err
	}
	r := res(mg)
	id := meta.GetExternalName(mg)
	lateInit := false
	if id == "" && e.cloudNamed {
		v, ok := e.learned.Load(string(mg.GetUID()))
		if !ok {
			return managed.ExternalObservation{ResourceExists: false}, nil
		}
		id = v.(string)
		// The ID reaches the object only here, and Crossplane's managed
		// reconciler persists it only if the resource may be late-initialized.
		meta.SetExternalName(mg, id)
		lateInit = true
	}
	o, err := e.cloud.get(e.kind, id)
	if err != nil {
		return managed.ExternalObservation{}, err
	}
	if o == nil {
		return managed.ExternalObservation{ResourceExists: false}, nil
	}
	if r.Spec.ForProvider == nil {
		r.Spec.ForProvider = map[string]any{}
	}
	upToDate := true
	for k, want := range r.Spec.ForProvider {
		if !reflect.DeepEqual(o.Params[k], want) {
			upToDate = false
		}
	}
	for k, v := range o.Params {
		if _, set := r.Spec.ForProvider[k]; !set {
			r.Spec.ForProvider[k] = v
			lateInit = true
		}
	}
	state := "creating"
	if time.Since(o.CreatedAt) >= e.cloud.readyAfter {
		state = "available"
	}
	at := map[string]any{"id": o.ID, "state": state}
	for k, v := range o.Params {
		at[k] = v
	}
	r.Status.AtProvider = at
	if state == "available" {
		r.SetConditions(xpv2.Available())
	} else {
		r.SetConditions(xpv2.Creating())
	}
	obs := managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: upToDate, ResourceLateInitialized: lateInit}
	if o.Password != "" {
		obs.ConnectionDetails = managed.ConnectionDetails{
			"endpoint": []byte(o.ID + ".rds.cloud.test:5432"),
			"password": []byte(o.Password),
		}
	}
	return obs, nil
}

func (e *external) Create(_ context.Context, mg resource.Managed) (managed.ExternalCreation, error) {
	if err := e.cloud.call("create"); err != nil {
		return managed.ExternalCreation{}, err
	}
	r := res(mg)
	id := meta.GetExternalName(mg)
	if e.cloudNamed || id == "" {
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		id = strings.ToLower(e.kind[:2]) + "-" + hex.EncodeToString(b)
	}
	params := map[string]any{}
	for k, v := range defaults[e.kind] {
		params[k] = v
	}
	for k, v := range r.Spec.ForProvider {
		params[k] = v
	}
	o := &cloudObject{ID: id, Token: string(mg.GetUID()), Params: params, CreatedAt: time.Now()}
	if e.cloudNamed {
		p := make([]byte, 12)
		_, _ = rand.Read(p)
		o.Password = hex.EncodeToString(p)
	}
	if err := e.cloud.put(e.kind, o); err != nil {
		return managed.ExternalCreation{}, err
	}
	e.cloud.log("create", e.kind, id, string(mg.GetUID()))
	crash := filepath.Join(e.cloud.dir, "crash-after-create")
	if _, err := os.Stat(crash); err == nil {
		_ = os.Remove(crash)
		fmt.Fprintf(os.Stderr, "provider: crash-after-create: exiting after the cloud made %s %s, before Create returned\n", e.kind, id)
		os.Exit(3)
	}
	if e.cloudNamed {
		e.learned.Store(string(mg.GetUID()), id)
	} else {
		meta.SetExternalName(mg, id)
	}
	return managed.ExternalCreation{}, nil
}

func (e *external) Update(_ context.Context, mg resource.Managed) (managed.ExternalUpdate, error) {
	if err := e.cloud.call("update"); err != nil {
		return managed.ExternalUpdate{}, err
	}
	o, err := e.cloud.get(e.kind, meta.GetExternalName(mg))
	if err != nil || o == nil {
		return managed.ExternalUpdate{}, fmt.Errorf("cloud: no %s named %q to update (%v)", e.kind, meta.GetExternalName(mg), err)
	}
	for k, v := range res(mg).Spec.ForProvider {
		o.Params[k] = v
	}
	e.cloud.log("update", e.kind, o.ID, string(mg.GetUID()))
	return managed.ExternalUpdate{}, e.cloud.put(e.kind, o)
}

func (e *external) Delete(_ context.Context, mg resource.Managed) (managed.ExternalDelete, error) {
	if err := e.cloud.call("delete"); err != nil {
		return managed.ExternalDelete{}, err
	}
	id := meta.GetExternalName(mg)
	if o, err := e.cloud.get(e.kind, id); err != nil || o == nil {
		return managed.ExternalDelete{}, err
	}
	e.cloud.log("delete", e.kind, id, string(mg.GetUID()))
	err := os.Remove(e.cloud.path(e.kind, id))
	if errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	return managed.ExternalDelete{}, err
}

func main() {
	state := flag.String("state", "", "the fake cloud's folder (required)")
	poll := flag.Duration("poll", 10*time.Second, "how often an up-to-date resource is observed again")
	readyAfter := flag.Duration("ready-after", 0, "how long a new cloud resource stays creating")
	grace := flag.Duration("creation-grace-period", 30*time.Second, "how long after a create an absent cloud resource is taken for the cloud's lag (crossplane-runtime's default)")
	debug := flag.Bool("debug", false, "log each reconcile")
	flag.Parse()
	if *state == "" {
		fmt.Fprintln(os.Stderr, "provider: --state is required: the fake cloud's folder")
		os.Exit(2)
	}
	if err := run(*state, *poll, *readyAfter, *grace, *debug); err != nil {
		fmt.Fprintf(os.Stderr, "provider: %v\n", err)
		os.Exit(1)
	}
}

func run(state string, poll, readyAfter, grace time.Duration, debug bool) error {
	if err := os.MkdirAll(state, 0o755); err != nil {
		return fmt.Errorf("cannot make the cloud's folder: %w", err)
	}
	zl := zap.New(zap.UseDevMode(debug))
	ctrl.SetLogger(zl)
	log := logging.NewLogrLogger(zl.WithName("provider"))

	// Kubernetes' own kinds (a Secret: where connection details are published), then this provider's.
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return fmt.Errorf("cannot register Kubernetes' kinds: %w", err)
	}
	for gvk, obj := range map[schema.GroupVersionKind][2]runtime.Object{
		bucketKind:   {&Bucket{}, &BucketList{}},
		instanceKind: {&Instance{}, &InstanceList{}},
	} {
		scheme.AddKnownTypeWithName(gvk, obj[0])
		scheme.AddKnownTypeWithName(gvk.GroupVersion().WithKind(gvk.Kind+"List"), obj[1])
		metav1.AddToGroupVersion(scheme, gvk.GroupVersion())
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("cannot read the kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return fmt.Errorf("cannot make the controller manager: %w", err)
	}
	c := &cloud{dir: state, readyAfter: readyAfter}
	for _, k := range []struct {
		gvk        schema.GroupVersionKind
		obj        resource.Managed
		cloudNamed bool
	}{{bucketKind, &Bucket{}, false}, {instanceKind, &Instance{}, true}} {
		name := "managed/" + strings.ToLower(k.gvk.GroupKind().String())
		opts := []managed.ReconcilerOption{
			managed.WithExternalConnector(&external{cloud: c, kind: k.gvk.Kind, cloudNamed: k.cloudNamed, learned: &sync.Map{}}),
			managed.WithManagementPolicies(),
			managed.WithPollInterval(poll),
			managed.WithCreationGracePeriod(grace),
			managed.WithLogger(log.WithValues("controller", name)),
			managed.WithRecorder(event.NewAPIRecorder(mgr.GetEventRecorderFor("provider-xfn-test"))), //nolint:staticcheck // crossplane-runtime's recorder takes this one.
		}
		if k.cloudNamed {
			// No initialiser: the cloud chooses the name.
			opts = append(opts, managed.WithInitializers())
		}
		r := managed.NewReconciler(mgr, resource.ManagedKind(k.gvk), opts...)
		if err := ctrl.NewControllerManagedBy(mgr).Named(name).For(k.obj).
			WithOptions(controller.Options{MaxConcurrentReconciles: 4}).Complete(r); err != nil {
			return fmt.Errorf("cannot set up %s: %w", name, err)
		}
	}
	log.Info("provider started", "state", state, "poll", poll.String(), "readyAfter", readyAfter.String())
	return mgr.Start(ctrl.SetupSignalHandler())
}
