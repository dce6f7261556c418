package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/provisioning"
	"github.com/codeport/codeport/internal/tenancy"
)

// PartnerReconciler provisions a Partner's two accounts (allowlist, rate limit, ordering flags
// and limits, per-environment overrides, suspension), its catalog binding and webhook endpoint.
// Deleting a Partner suspends its accounts and revokes its keys; orders and the ledger stay.
type PartnerReconciler struct {
	client.Client
	// APIReader reads the webhook Secret: it is the user's, not the operator's, so it is not in
	// the cache; its changes arrive through the metadata-only watch of referenced Secrets.
	APIReader   client.Reader
	Provisioner *provisioning.Provisioner
	Recorder    events.EventRecorder
	Options     Options
}

// +kubebuilder:rbac:groups=codeport.dev,resources=partners,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=codeport.dev,resources=partners/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=codeport.dev,resources=partners/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch

// Reconcile is the whole flow of a Partner: fetch → deletion → catalog and webhook → accounts
// → status.
func (r *PartnerReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var p v1alpha1.Partner
	if err := r.Get(ctx, req.NamespacedName, &p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := outcomeOf(&p)
	result, err := withFinalizer(ctx, r.Client, &p,
		func(ctx context.Context) error {
			if err := r.Provisioner.RetirePartner(ctx, p.Namespace, p.Name); err != nil {
				return fmt.Errorf("suspend accounts and revoke keys: %w", err)
			}
			return nil
		},
		func(ctx context.Context) (ctrl.Result, error) { return r.apply(ctx, &p) },
		func() { p.Status.ObservedGeneration = p.Generation })
	recordOutcome(r.Recorder, before, &p)
	return result, err
}

func (r *PartnerReconciler) apply(ctx context.Context, p *v1alpha1.Partner) (ctrl.Result, error) {
	result := ctrl.Result{RequeueAfter: r.Options.Resync}
	binding, err := r.resolveCatalog(ctx, p)
	if err != nil {
		return ctrl.Result{}, err
	}
	if binding.problem != "" {
		result.RequeueAfter = r.Options.NotReadyRetry
	}
	webhooks, webhookProblem, err := r.webhooks(ctx, p)
	if err != nil {
		return ctrl.Result{}, err
	}
	res, err := r.Provisioner.ApplyPartner(ctx, p, binding.id, webhooks)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("provision accounts: %w", err)
	}
	p.Status.Accounts = v1alpha1.PartnerAccounts{
		Sandbox:    res.Accounts[string(tenancy.Sandbox)].String(),
		Production: res.Accounts[string(tenancy.Production)].String(),
	}
	switch {
	case webhookProblem != "":
		setCondition(&p.Status.Conditions, p.Generation, v1alpha1.ConditionReady, false,
			v1alpha1.ReasonWebhookSecretNotFound, webhookProblem)
		result.RequeueAfter = r.Options.NotReadyRetry
	case p.Spec.Suspended:
		setCondition(&p.Status.Conditions, p.Generation, v1alpha1.ConditionReady, true, v1alpha1.ReasonSuspended,
			"Accounts provisioned and suspended: every request of the partner's keys is refused")
	case binding.problem != "":
		setCondition(&p.Status.Conditions, p.Generation, v1alpha1.ConditionReady, false, binding.reason,
			"Accounts provisioned; "+binding.problem)
	case binding.notice != "":
		setCondition(&p.Status.Conditions, p.Generation, v1alpha1.ConditionReady, true, v1alpha1.ReasonReconciled,
			"Sandbox and production accounts provisioned; "+binding.notice)
	default:
		setCondition(&p.Status.Conditions, p.Generation, v1alpha1.ConditionReady, true, v1alpha1.ReasonReconciled,
			"Sandbox and production accounts provisioned")
	}
	return result, nil
}

// catalogBinding is the catalog a partner is to serve: id (nil: none); when catalogRef
// cannot be bound, why (reason and problem); when it is bound to a Catalog outside its validity
// window, a notice that the partner is served no products now (a planned state, not a fault).
type catalogBinding struct {
	id              *uuid.UUID
	reason, problem string
	notice          string
}

// resolveCatalog finds the provisioned catalog of catalogRef and records CatalogResolved.
// Unbinding is destructive, so it is decided only on what the API server and the database say:
// a Catalog missing from the cache is looked up uncached, and a failed read fails the reconcile
// instead of unbinding. A catalogRef that cannot be bound (a typo, a Catalog not in service yet)
// keeps the catalog the partner serves now in service, as a Catalog with an invalid product keeps
// its last good version: one mistyped name must not take a live catalog offline.
func (r *PartnerReconciler) resolveCatalog(ctx context.Context, p *v1alpha1.Partner) (catalogBinding, error) {
	if p.Spec.CatalogRef == nil {
		setCondition(&p.Status.Conditions, p.Generation, v1alpha1.ConditionCatalogResolved, true, v1alpha1.ReasonNoCatalog,
			"No catalogRef: the partner's catalog is empty (sandbox keeps its test products)")
		return catalogBinding{}, nil
	}
	name := p.Spec.CatalogRef.Name
	key := types.NamespacedName{Namespace: p.Namespace, Name: name}
	var c v1alpha1.Catalog
	err := r.Get(ctx, key, &c)
	if apierrors.IsNotFound(err) {
		err = r.APIReader.Get(ctx, key, &c)
	}
	var b catalogBinding
	switch {
	case apierrors.IsNotFound(err):
		b.reason = v1alpha1.ReasonCatalogNotFound
		b.problem = fmt.Sprintf("Catalog %q not found in namespace %s: create it or fix spec.catalogRef", name, p.Namespace)
	case err != nil:
		return catalogBinding{}, fmt.Errorf("read Catalog %s: %w", name, err)
	default:
		id, err := r.Provisioner.CatalogID(ctx, p.Namespace, name)
		switch {
		case provisioning.IsNotFound(err):
			// Not provisioned yet (first version invalid, or not reconciled yet); the Catalog
			// watch brings the partner back when it is.
			b.reason = v1alpha1.ReasonCatalogNotReady
			b.problem = fmt.Sprintf("Catalog %q is not in service yet: see its Ready condition", name)
		case err != nil:
			return catalogBinding{}, fmt.Errorf("resolve Catalog %s: %w", name, err)
		default:
			// Bound either way: the API serves the catalog's products from validFrom without
			// another reconcile, and the Catalog's status change at each edge brings the
			// partner back to say so.
			if w := windowOf(&c, time.Now()); w.outside != "" {
				setCondition(&p.Status.Conditions, p.Generation, v1alpha1.ConditionCatalogResolved, true,
					v1alpha1.ReasonOutsideValidityWindow,
					fmt.Sprintf("Catalog %q bound; no product in service: %s", name, w.outside))
				notice := fmt.Sprintf("Catalog %q has no product in service: %s", name, w.outside)
				return catalogBinding{id: &id, notice: notice}, nil
			}
			setCondition(&p.Status.Conditions, p.Generation, v1alpha1.ConditionCatalogResolved, true,
				v1alpha1.ReasonReconciled, fmt.Sprintf("Catalog %q bound", name))
			return catalogBinding{id: &id}, nil
		}
	}
	bound, boundName, err := r.Provisioner.BoundCatalog(ctx, p.Namespace, p.Name)
	switch {
	case provisioning.IsNotFound(err):
		b.problem += "; the partner serves no catalog until it is"
	case err != nil:
		return catalogBinding{}, fmt.Errorf("read the catalog of partner %s: %w", p.Name, err)
	default:
		b.id = &bound
		b.problem += fmt.Sprintf("; Catalog %q stays in service until it is", boundName)
	}
	setCondition(&p.Status.Conditions, p.Generation, v1alpha1.ConditionCatalogResolved, false, b.reason, b.problem)
	return b, nil
}

// webhooks resolves the partner's endpoint of each environment, reading the webhook Secrets
// uncached (they are not the operator's); a problem a human must fix is returned as text.
func (r *PartnerReconciler) webhooks(ctx context.Context, p *v1alpha1.Partner) (provisioning.Webhooks, string, error) {
	var problems []string
	webhooks, err := provisioning.ResolveWebhooks(&p.Spec, func(ref v1alpha1.SecretKeySelector) ([]byte, bool, error) {
		var s corev1.Secret
		err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: ref.Name}, &s)
		if apierrors.IsNotFound(err) {
			problems = append(problems,
				fmt.Sprintf("webhook Secret %q not found; events are not sent until it exists", ref.Name))
			return nil, false, nil
		}
		if err != nil {
			return nil, false, failed(v1alpha1.ReasonSecretError, fmt.Errorf("read webhook Secret %s: %w", ref.Name, err))
		}
		secret, ok := s.Data[ref.Key]
		if !ok || len(secret) == 0 {
			problems = append(problems, fmt.Sprintf("webhook Secret %q has no key %q", ref.Name, ref.Key))
			return nil, false, nil
		}
		return secret, true, nil
	})
	return webhooks, strings.Join(problems, "; "), err
}

// SetupWithManager watches Partners, the Catalogs they bind and the webhook Secrets they read.
func (r *PartnerReconciler) SetupWithManager(mgr ctrl.Manager, refs referenceCache) error {
	ctx := context.Background()
	indexer := mgr.GetFieldIndexer()
	if err := indexer.IndexField(ctx, &v1alpha1.Partner{}, indexCatalogRef, func(o client.Object) []string {
		if ref := o.(*v1alpha1.Partner).Spec.CatalogRef; ref != nil {
			return []string{ref.Name}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("index Partners by catalogRef: %w", err)
	}
	if err := indexer.IndexField(ctx, &v1alpha1.Partner{}, indexWebhookSecret, func(o client.Object) []string {
		spec := &o.(*v1alpha1.Partner).Spec
		var names []string
		for _, env := range provisioning.Environments() {
			if w := provisioning.EffectivePolicy(spec, env).Webhook; w != nil && !slices.Contains(names, w.SecretRef.Name) {
				names = append(names, w.SecretRef.Name)
			}
		}
		return names
	}); err != nil {
		return fmt.Errorf("index Partners by webhook Secret: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.Partner{}).
		Watches(&v1alpha1.Catalog{}, handler.EnqueueRequestsFromMapFunc(
			func(ctx context.Context, c client.Object) []reconcile.Request {
				return referrers(ctx, r.Client, &v1alpha1.PartnerList{}, indexCatalogRef, c)
			})).
		WatchesRawSource(source.Kind(refs, metadataOf("Secret"), handler.TypedEnqueueRequestsFromMapFunc(
			func(ctx context.Context, s *metav1.PartialObjectMetadata) []reconcile.Request {
				return referrers(ctx, r.Client, &v1alpha1.PartnerList{}, indexWebhookSecret, s)
			}))).
		Named("partner").
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Options.Concurrency}).
		Complete(r)
}
