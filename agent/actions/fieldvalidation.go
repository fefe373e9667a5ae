package actions

import (
	"net/url"
	"sync"
	"sync/atomic"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/kube"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	kubectlopenapi "k8s.io/kubectl/pkg/util/openapi"
	"k8s.io/kubectl/pkg/validation"
)

// fieldValidationAnswers is how many answers fieldValidation keeps: one
// per kind and version of the OpenAPI v3 document that kind is in (a few
// dozen for the kinds charts hold; a changed document adds new ones).
const fieldValidationAnswers = 1024

// fieldValidation keeps, across Helm's manifest builds and across actions,
// kubectl's answer to the question its validator asks before every build:
// does the spoke's API server validate this kind's fields itself (does its
// PATCH take the fieldValidation query parameter)? kubectl answers it from
// the group-version's OpenAPI v3 document, which it parses anew for every
// build: two builds per upgrade, each of the whole document (apps/v1's
// is ~1 MB of JSON), was two thirds of the agent's upgrade CPU
// (docs/benchmarks.md). The answer depends on nothing but that document,
// so it is kept by kind and by the document's server-relative URL, which
// carries the document's hash: a changed API (a CRD's new schema, a server
// upgraded) has a new hash and is read and answered again. Only answers
// read from a document (yes, or "not supported") are kept, never an error
// (a failed download, a document that could not be parsed), nor an answer
// for a kind whose group-version has no OpenAPI v3 document (kubectl then
// looks for a CRD of the kind). Bounded by fieldValidationAnswers, least
// recently used out first. Safe for concurrent use.
//
// Validation itself is kubectl's, unchanged (validator): when the server
// validates fields, kubectl's client-side schema validation is skipped
// (the API server refuses what does not fit its schema when the upgrade
// applies it); when it does not, kubectl validates the manifest against
// the OpenAPI schema, as before.
type fieldValidation struct {
	answers *lru[fieldValidationKey, error]
	// computed counts the answers read from a document (the misses).
	computed atomic.Int64
}

// fieldValidationKey is a kind in a version of its OpenAPI v3 document.
type fieldValidationKey struct {
	gvk schema.GroupVersionKind
	// doc is the document's URL relative to the server, with its hash
	// ("/openapi/v3/apis/apps/v1?hash=...").
	doc string
}

func newFieldValidation() *fieldValidation {
	return &fieldValidation{answers: newLRU[fieldValidationKey, error](fieldValidationAnswers)}
}

// verifier answers from the kept answers, and reads the others from the
// OpenAPI v3 documents of docs (the current view of the spoke's APIs),
// through kubectl's verifier over them (which finds CRDs with dynamic).
func (f *fieldValidation) verifier(docs openapi.Client, next resource.Verifier) resource.Verifier {
	return &keptVerifier{kept: f, docs: docs, next: next}
}

type keptVerifier struct {
	kept *fieldValidation
	docs openapi.Client
	next resource.Verifier
}

// HasSupport implements resource.Verifier.
func (v *keptVerifier) HasSupport(gvk schema.GroupVersionKind) error {
	key, ok := v.key(gvk)
	if ok {
		if err, found := v.kept.answers.get(key); found {
			return err
		}
	}
	err := v.next.HasSupport(gvk)
	if ok && (err == nil || resource.IsParamUnsupportedError(err)) {
		v.kept.computed.Add(1)
		v.kept.answers.put(key, err, 1)
	}
	return err
}

// key is what the answer for gvk is kept under, if it can be: the
// group-version has an OpenAPI v3 document whose URL has a hash.
func (v *keptVerifier) key(gvk schema.GroupVersionKind) (fieldValidationKey, bool) {
	paths, err := v.docs.Paths()
	if err != nil {
		return fieldValidationKey{}, false
	}
	doc, ok := paths[openAPIPath(gvk.GroupVersion())]
	if !ok {
		return fieldValidationKey{}, false
	}
	u, err := url.Parse(doc.ServerRelativeURL())
	if err != nil || u.Query().Get("hash") == "" {
		// No hash: a change of the document could not be told.
		return fieldValidationKey{}, false
	}
	return fieldValidationKey{gvk: gvk, doc: doc.ServerRelativeURL()}, true
}

// openAPIPath is the OpenAPI v3 discovery document's path of gv
// ("api/v1", "apis/apps/v1"), as openapi3.Root looks it up.
func openAPIPath(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "api/" + gv.Version
	}
	return "apis/" + gv.Group + "/" + gv.Version
}

// validator is the kubectl factory Helm builds manifests with, whose
// Validator asks fieldValidation instead of parsing the OpenAPI v3
// documents for every build. Everything else is the factory's.
type validator struct {
	cmdutil.Factory
	kept *fieldValidation
	apis discovery.CachedDiscoveryInterface // the view of the spoke's APIs

	v2Once sync.Once
	v2     discovery.OpenAPISchemaInterface // the OpenAPI v2 document, once read
}

// Validator is kubectl's (cmdutil.Factory's) validator with the verifier
// kept across builds: client-side schema validation and the duplicate-key
// check when the server does not validate fields itself (kubectl's
// validation.ParamVerifyingSchema decides, as for kubectl), nothing more
// when it does; nothing for metav1.FieldValidationIgnore.
func (f *validator) Validator(directive string) (validation.Schema, error) {
	if directive == metav1.FieldValidationIgnore {
		return f.Factory.Validator(directive)
	}
	dynamicClient, err := f.DynamicClient()
	if err != nil {
		return nil, err
	}
	docs := f.apis.OpenAPIV3() // kept with the view (the memory cache)
	param := resource.QueryParamFieldValidation
	primary := f.kept.verifier(docs, resource.NewQueryParamVerifierV3(dynamicClient, docs, param))
	// OpenAPI v2 where v3 fails, read once per Helm configuration (an
	// action), as kubectl's factory does.
	f.v2Once.Do(func() { f.v2 = kubectlopenapi.NewOpenAPIGetter(f.apis) })
	secondary := resource.NewQueryParamVerifier(dynamicClient, f.v2, param)
	schemas := validation.ConjunctiveSchema{validation.NewSchemaValidation(f.Factory), validation.NoDoubleKeySchema{}}
	return validation.NewParamVerifyingSchema(schemas, resource.NewFallbackQueryParamVerifier(primary, secondary), directive), nil
}

// keepFieldValidation makes cfg's Helm kube client build manifests with
// e's kept field-validation answers. A kube client or factory of another
// type (not Helm's, not kubectl's) is left as it is, and so is every one
// when e keeps none.
func (e *Executor) keepFieldValidation(cfg *action.Configuration) {
	kc, ok := cfg.KubeClient.(*kube.Client)
	if !ok || e.fieldValidation == nil {
		return
	}
	if f, ok := kc.Factory.(cmdutil.Factory); ok {
		kc.Factory = &validator{Factory: f, kept: e.fieldValidation, apis: e.apis}
	}
}
