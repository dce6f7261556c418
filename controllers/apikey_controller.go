package controllers

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/auth"
	"github.com/codeport/codeport/internal/provisioning"
)

// Keys of an ApiKey's Secret.
const (
	SecretKeyAPIKey      = "apiKey"
	SecretKeyEnvironment = "environment"
	SecretKeyBaseURL     = "baseUrl"
	SecretKeyType        = "type"
	// annotationRotation records which spec.rotation the Secret's key belongs to, so a rotation
	// interrupted after writing the Secret resumes with that key instead of issuing another.
	annotationRotation = "codeport.dev/rotation"
	annotationIssuedAt = "codeport.dev/issued-at"
)

// APIKeyReconciler issues a key once, keeps its plaintext only in the Secret it owns, and its
// SHA-256 digest in the database. It never regenerates a key on later reconciles or restarts;
// raising spec.rotation issues a new key and revokes the previous one at once.
type APIKeyReconciler struct {
	client.Client
	// APIReader reads past the cache. Every decision that replaces or revokes a key (the Secret
	// looks missing, invalid, of an older rotation; its key looks revoked or unregistered) is
	// taken again on a Secret read through it before it is acted on: a lagging cache, or a key
	// Secret without the operator's label (not cached at all), never costs a key.
	APIReader   client.Reader
	Provisioner *provisioning.Provisioner
	Recorder    events.EventRecorder
	Options     Options
	keyEvents   *prometheus.CounterVec
}

func (r *APIKeyReconciler) count(k *v1alpha1.ApiKey, event string) {
	if r.keyEvents != nil {
		r.keyEvents.WithLabelValues(string(k.Spec.Environment), event).Inc()
	}
}

// +kubebuilder:rbac:groups=codeport.dev,resources=apikeys,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=codeport.dev,resources=apikeys/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=codeport.dev,resources=apikeys/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

func keySource(k *v1alpha1.ApiKey) string { return k.Namespace + "/" + k.Name }

// Reconcile is the whole flow of an ApiKey: fetch → deletion (revoke) → partner → Secret and
// key → status.
func (r *APIKeyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var k v1alpha1.ApiKey
	if err := r.Get(ctx, req.NamespacedName, &k); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return withFinalizer(ctx, r.Client, &k,
		func(ctx context.Context) error {
			n, err := r.Provisioner.RevokeKeys(ctx, keySource(&k))
			if n > 0 {
				r.count(&k, "revoked")
			}
			if err != nil {
				return fmt.Errorf("revoke key: %w", err)
			}
			return nil
		},
		func(ctx context.Context) (ctrl.Result, error) { return r.apply(ctx, &k) },
		func() { k.Status.ObservedGeneration = k.Generation })
}

// keyAction is what a reconcile does with the ApiKey's Secret and key.
type keyAction int

const (
	// keyCurrent: the Secret holds this rotation's key and the database knows it as active.
	keyCurrent keyAction = iota
	// keyConflict: the Secret name is not this ApiKey's (see secretOwner); nothing is written.
	keyConflict
	// keyMissing: no Secret; a key is issued into a new one (revoking any previous key).
	keyMissing
	// keyInvalid: the Secret holds no well-formed key of the environment; a key is issued.
	keyInvalid
	// keyForeign: the database has the Secret's key registered to another ApiKey (a Secret's
	// data copied from another ApiKey's): it is never adopted, and a key is issued. The other
	// ApiKey's key is left as it is: the operator cannot tell a copy from a leak, and revoking
	// it would cut off the partner it belongs to.
	keyForeign
	// keyShared: the database does not know the Secret's key and another ApiKey's Secret holds
	// it too: neither can show it is theirs, so it is registered revoked (no ApiKey can ever
	// adopt it) and a key is issued.
	keyShared
	// keyRotate: the Secret's key is of an older spec.rotation; a key is issued.
	keyRotate
	// keyRevoked: the Secret's key was revoked in the database; a key is issued.
	keyRevoked
	// keyUnregistered: the database does not know the Secret's key (restored backup) and no
	// other ApiKey's Secret holds it; it is registered from the Secret, which revokes any other
	// key of the ApiKey.
	keyUnregistered
)

// replacesKey reports whether acting on the decision issues, revokes or re-registers a key.
func (a keyAction) replacesKey() bool { return a != keyCurrent && a != keyConflict }

// keyPlan is a decision and what it was taken on.
type keyPlan struct {
	action keyAction
	// secret is the ApiKey's Secret (nil: none).
	secret *corev1.Secret
	// owner is, for keyConflict, the ApiKey the Secret name is left to ("": the Secret is not
	// an ApiKey's).
	owner string
}

// plan reads the ApiKey's Secret and decides what to do. A decision that replaces or revokes a
// key is taken on the cached Secret only as a hint: it is taken again on the Secret as the API
// server has it, and that decision is the one returned, with that Secret.
func (r *APIKeyReconciler) plan(ctx context.Context, k *v1alpha1.ApiKey) (keyPlan, error) {
	secret, err := readSecret(ctx, r.Client, k)
	if err != nil {
		return keyPlan{}, err
	}
	p, err := r.decide(ctx, k, secret)
	if err != nil || !p.action.replacesKey() {
		return p, err
	}
	if secret, err = readSecret(ctx, r.APIReader, k); err != nil {
		return keyPlan{}, err
	}
	return r.decide(ctx, k, secret)
}

// readSecret reads the ApiKey's Secret through reader; nil when there is none.
func readSecret(ctx context.Context, reader client.Reader, k *v1alpha1.ApiKey) (*corev1.Secret, error) {
	var secret corev1.Secret
	err := reader.Get(ctx, types.NamespacedName{Namespace: k.Namespace, Name: k.Spec.SecretName}, &secret)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, failed(v1alpha1.ReasonSecretError, fmt.Errorf("read Secret %s: %w", k.Spec.SecretName, err))
	}
	return &secret, nil
}

// decide is what to do given the Secret (nil: none): whose its name is (secretOwner), then what
// its key is (judgeKey).
func (r *APIKeyReconciler) decide(ctx context.Context, k *v1alpha1.ApiKey, secret *corev1.Secret) (keyPlan, error) {
	var claimants v1alpha1.ApiKeyList
	if secret == nil {
		err := r.List(ctx, &claimants, client.InNamespace(k.Namespace),
			client.MatchingFields{indexSecretName: k.Spec.SecretName})
		if err != nil {
			return keyPlan{}, fmt.Errorf("list the ApiKeys naming Secret %s: %w", k.Spec.SecretName, err)
		}
	}
	if owner, ours := secretOwner(k, secret, claimants.Items); !ours {
		return keyPlan{action: keyConflict, secret: secret, owner: owner}, nil
	}
	if secret == nil {
		return keyPlan{action: keyMissing}, nil
	}
	facts, err := r.keyFacts(ctx, k, secret)
	if err != nil {
		return keyPlan{}, err
	}
	return keyPlan{action: judgeKey(k, facts), secret: secret}, nil
}

// secretOwner says whether the Secret name is k's, and otherwise whose it is. An existing Secret
// is its controller's, whoever names it. A missing one is created by the first of the ApiKeys
// naming it (firstClaimant), so that the name never passes to another ApiKey because of which
// reconcile happens to run first.
func secretOwner(k *v1alpha1.ApiKey, secret *corev1.Secret, claimants []v1alpha1.ApiKey) (owner string, ours bool) {
	if secret != nil {
		if metav1.IsControlledBy(secret, k) {
			return k.Name, true
		}
		if ref := metav1.GetControllerOf(secret); ref != nil && ref.Kind == "ApiKey" &&
			ref.APIVersion == v1alpha1.GroupVersion.String() {
			return ref.Name, false
		}
		return "", false
	}
	first := firstClaimant(k, claimants)
	return first.Name, first.Name == k.Name
}

// firstClaimant is, among k and the claimants, the ApiKey that creates their Secret when it is
// missing: the oldest that names it and is not being deleted, by name between equals (creation
// times have whole seconds).
func firstClaimant(k *v1alpha1.ApiKey, claimants []v1alpha1.ApiKey) *v1alpha1.ApiKey {
	first := k
	for i := range claimants {
		c := &claimants[i]
		if c.Name == k.Name || c.Spec.SecretName != k.Spec.SecretName || !c.DeletionTimestamp.IsZero() {
			continue
		}
		older := c.CreationTimestamp.Before(&first.CreationTimestamp)
		if older || c.CreationTimestamp.Equal(&first.CreationTimestamp) && c.Name < first.Name {
			first = c
		}
	}
	return first
}

// keyFacts is what judgeKey decides on: the Secret's key as the database and the other key
// Secrets know it.
type keyFacts struct {
	// wellFormed: the Secret holds a key of the ApiKey's environment (nothing else is known
	// otherwise).
	wellFormed bool
	// rotation is the spec.rotation the Secret's key was issued for.
	rotation int64
	// stored is the database's record of the key.
	stored provisioning.KeyStatus
	// heldElsewhere: the Secret of another ApiKey holds the key too (looked up only when the
	// database does not know it: otherwise the database says whose it is).
	heldElsewhere bool
}

// keyFacts reads what judgeKey needs to know of the Secret's key: one database query, and a
// look at the cached key Secrets when the database does not know the key.
func (r *APIKeyReconciler) keyFacts(ctx context.Context, k *v1alpha1.ApiKey, secret *corev1.Secret) (keyFacts, error) {
	plaintext := string(secret.Data[SecretKeyAPIKey])
	var f keyFacts
	env, wellFormed := auth.ParseKey(plaintext)
	if f.wellFormed = wellFormed && env == string(k.Spec.Environment); !f.wellFormed {
		return f, nil
	}
	f.rotation, _ = strconv.ParseInt(secret.Annotations[annotationRotation], 10, 64)
	var err error
	if f.stored, err = r.Provisioner.KeyState(ctx, plaintext); err != nil {
		return f, failed(v1alpha1.ReasonDatabaseError, fmt.Errorf("look up key %s: %w", auth.DisplayPrefix(plaintext), err))
	}
	if f.stored.Exists {
		return f, nil
	}
	var holders corev1.SecretList
	if err := r.List(ctx, &holders, client.MatchingFields{indexKeyDigest: keyDigest(secret)}); err != nil {
		return f, fmt.Errorf("list the key Secrets holding key %s: %w", auth.DisplayPrefix(plaintext), err)
	}
	for i := range holders.Items {
		other := &holders.Items[i]
		owner := metav1.GetControllerOf(other)
		if client.ObjectKeyFromObject(other) != client.ObjectKeyFromObject(secret) &&
			owner != nil && owner.Kind == "ApiKey" && owner.UID != k.UID {
			f.heldElsewhere = true
		}
	}
	return f, nil
}

// judgeKey decides what to do with the key of a Secret that is the ApiKey's. A key is kept or
// registered only when the database has it as this ApiKey's, or knows it as nobody's and no
// other ApiKey's Secret holds it: a key is never adopted from another ApiKey, whatever its state.
func judgeKey(k *v1alpha1.ApiKey, f keyFacts) keyAction {
	switch {
	case !f.wellFormed:
		return keyInvalid
	case f.stored.Exists && f.stored.Source != keySource(k):
		return keyForeign
	case !f.stored.Exists && f.heldElsewhere:
		return keyShared
	case f.rotation < k.Spec.Rotation:
		return keyRotate
	case !f.stored.Exists:
		return keyUnregistered
	case !f.stored.Active:
		return keyRevoked
	}
	return keyCurrent
}

// apiKeySecretName is the value of indexSecretName for an ApiKey.
func apiKeySecretName(o client.Object) []string {
	return []string{o.(*v1alpha1.ApiKey).Spec.SecretName}
}

// secretKeyDigest is the value of indexKeyDigest for a Secret.
func secretKeyDigest(o client.Object) []string {
	if digest := keyDigest(o.(*corev1.Secret)); digest != "" {
		return []string{digest}
	}
	return nil
}

// keyDigest is the hex SHA-256 of a Secret's key, by which the cache indexes key Secrets ("":
// none). The digest, not the key: the index must not be another copy of the plaintext.
func keyDigest(secret *corev1.Secret) string {
	plaintext := secret.Data[SecretKeyAPIKey]
	if len(plaintext) == 0 {
		return ""
	}
	digest := auth.Digest(string(plaintext))
	return hex.EncodeToString(digest[:])
}

// apply provisions the key, then follows the key its last rotation replaced, if that one is in a
// grace period.
func (r *APIKeyReconciler) apply(ctx context.Context, k *v1alpha1.ApiKey) (ctrl.Result, error) {
	result, err := r.applyKey(ctx, k)
	ready := meta.FindStatusCondition(k.Status.Conditions, v1alpha1.ConditionReady)
	if err != nil || ready == nil || ready.Status != metav1.ConditionTrue || ready.ObservedGeneration != k.Generation {
		return result, err
	}
	return r.settlePreviousKey(ctx, k, result)
}

// gracePeriod is how long the key a rotation replaces stays valid (0: revoked at once).
func gracePeriod(k *v1alpha1.ApiKey) time.Duration {
	if k.Spec.PreviousKeyGracePeriod == nil {
		return 0
	}
	return max(k.Spec.PreviousKeyGracePeriod.Duration, 0)
}

// previousKeyRecheck bounds how soon the end of a grace period is looked at again when the
// operator's clock says it has passed and the database's does not yet.
const previousKeyRecheck = time.Second

// settlePreviousKey shows the key in a rotation's grace period in status and wakes the ApiKey
// when the period ends, to record the key revoked and clear the status. The API refuses the key
// at that moment by itself, whether or not the operator runs: this only makes the database and
// the status say so, and the database's clock decides.
func (r *APIKeyReconciler) settlePreviousKey(
	ctx context.Context, k *v1alpha1.ApiKey, result ctrl.Result,
) (ctrl.Result, error) {
	source := keySource(k)
	prev, found, err := r.Provisioner.PreviousKey(ctx, source)
	if err != nil {
		return ctrl.Result{}, failed(v1alpha1.ReasonDatabaseError, err)
	}
	if found && prev.Expired {
		n, err := r.Provisioner.RevokeExpiredKeys(ctx, source)
		if err != nil {
			return ctrl.Result{}, failed(v1alpha1.ReasonDatabaseError, err)
		}
		if n > 0 {
			r.count(k, "revoked")
			r.Recorder.Eventf(k, nil, corev1.EventTypeNormal, "PreviousKeyRevoked", "Revoke",
				"Key %s revoked: its grace period ended at %s", prev.KeyPrefix, prev.ExpiresAt.UTC().Format(time.RFC3339))
		}
		found = false
	}
	if !found {
		k.Status.PreviousKeyPrefix, k.Status.PreviousKeyExpiresAt = "", nil
		return result, nil
	}
	expires := metav1.NewTime(prev.ExpiresAt.UTC())
	k.Status.PreviousKeyPrefix, k.Status.PreviousKeyExpiresAt = prev.KeyPrefix, &expires
	wait := max(time.Until(prev.ExpiresAt), previousKeyRecheck)
	if result.RequeueAfter == 0 || wait < result.RequeueAfter {
		result.RequeueAfter = wait
	}
	return result, nil
}

// applyKey ensures the Partner is ready and the Secret holds an active key of this rotation.
func (r *APIKeyReconciler) applyKey(ctx context.Context, k *v1alpha1.ApiKey) (ctrl.Result, error) {
	var partner v1alpha1.Partner
	err := r.Get(ctx, types.NamespacedName{Namespace: k.Namespace, Name: k.Spec.PartnerRef.Name}, &partner)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("read Partner %s: %w", k.Spec.PartnerRef.Name, err)
	}
	if ok, reason, message := partnerReady(&partner, err == nil); !ok {
		setCondition(&k.Status.Conditions, k.Generation, v1alpha1.ConditionReady, false, reason, message)
		return ctrl.Result{RequeueAfter: r.Options.NotReadyRetry}, nil
	}

	p, err := r.plan(ctx, k)
	if err != nil {
		return ctrl.Result{}, err
	}
	secret := p.secret
	var prefix string
	if secret != nil {
		prefix = auth.DisplayPrefix(string(secret.Data[SecretKeyAPIKey]))
	}
	switch p.action {
	case keyConflict:
		r.refuseSecretName(k, p)
		return ctrl.Result{RequeueAfter: r.Options.ConflictRetry}, nil
	case keyMissing:
		var cause *keyEvent
		if k.Status.KeyPrefix != "" {
			// The only copy of the plaintext is gone: nobody can be using the key legitimately.
			if _, err := r.Provisioner.RevokeKeys(ctx, keySource(k)); err != nil {
				return ctrl.Result{}, failed(v1alpha1.ReasonDatabaseError, fmt.Errorf("revoke key of the deleted Secret: %w", err))
			}
			cause = &keyEvent{corev1.EventTypeWarning, "SecretDeleted", "Reissue",
				fmt.Sprintf("Secret %s was deleted: key %s revoked", k.Spec.SecretName, k.Status.KeyPrefix)}
		}
		return r.issue(ctx, k, nil, 0, cause)
	case keyInvalid:
		return r.issue(ctx, k, secret, 0, &keyEvent{corev1.EventTypeWarning, "InvalidSecret", "Reissue",
			fmt.Sprintf("Secret %s did not hold a valid %s key", k.Spec.SecretName, k.Spec.Environment)})
	case keyForeign:
		return r.issue(ctx, k, secret, 0, foreignKeyEvent(k, prefix))
	case keyShared:
		// Registered revoked under this ApiKey, the key can be no ApiKey's from now on: the other
		// ApiKey holding it finds it registered to this one (keyForeign) and replaces it too.
		if err := r.register(ctx, k, string(secret.Data[SecretKeyAPIKey]), 0, 0, true); err != nil {
			return ctrl.Result{}, err
		}
		return r.issue(ctx, k, secret, 0, &keyEvent{corev1.EventTypeWarning, "ForeignKey", "Reissue",
			fmt.Sprintf("Secret %s held key %s, which the database does not know and another ApiKey's Secret "+
				"holds too: it was registered revoked, to be neither ApiKey's; this ApiKey's keys revoked",
				k.Spec.SecretName, prefix)})
	case keyRotate:
		return r.issue(ctx, k, secret, gracePeriod(k), rotatedEvent(k, prefix))
	case keyRevoked:
		// Revoked behind our back (partner deleted and re-created, manual revocation): issue anew.
		return r.issue(ctx, k, secret, 0, &keyEvent{corev1.EventTypeWarning, "KeyRevoked", "Reissue",
			fmt.Sprintf("Key %s was revoked in the database", prefix)})
	case keyUnregistered, keyCurrent:
	}
	plaintext := string(secret.Data[SecretKeyAPIKey])
	rotation, _ := strconv.ParseInt(secret.Annotations[annotationRotation], 10, 64)
	if p.action == keyUnregistered {
		// A rotation whose key reached the Secret but not the database (the registration failed)
		// completes here: the key it replaces keeps its grace period.
		grace := time.Duration(0)
		if rotation > k.Status.Rotation {
			grace = gracePeriod(k)
		}
		err := r.register(ctx, k, plaintext, rotation, grace, false)
		if errors.Is(err, provisioning.ErrKeyOfAnotherSource) {
			// Another ApiKey registered it since it was looked up: it is that ApiKey's.
			return r.issue(ctx, k, secret, 0, foreignKeyEvent(k, prefix))
		}
		if err != nil {
			return ctrl.Result{}, err
		}
		if rotation > k.Status.Rotation && k.Status.KeyPrefix != "" {
			r.recordIssued(k, rotatedEvent(k, k.Status.KeyPrefix), plaintext)
		} else {
			r.Recorder.Eventf(k, nil, corev1.EventTypeWarning, "KeyRestored", "Restore",
				"Key %s was missing from the database (restored backup?): registered again from the Secret", prefix)
		}
	}
	if err := r.refreshSecret(ctx, k, secret); err != nil {
		return ctrl.Result{}, err
	}
	r.setIssued(k, plaintext, rotation, secret.Annotations[annotationIssuedAt])
	return ctrl.Result{}, nil
}

// keyEvent is the event recording why a key was issued; it is recorded once the key is issued.
type keyEvent struct{ eventType, reason, action, note string }

// recordIssued records that key plaintext was issued into the Secret, and why (nil: for no
// other reason than that the ApiKey had none).
func (r *APIKeyReconciler) recordIssued(k *v1alpha1.ApiKey, cause *keyEvent, plaintext string) {
	if cause == nil {
		r.Recorder.Eventf(k, nil, corev1.EventTypeNormal, "Issued", "Issue",
			"Key %s issued into Secret %s", auth.DisplayPrefix(plaintext), k.Spec.SecretName)
		return
	}
	r.Recorder.Eventf(k, nil, cause.eventType, cause.reason, cause.action, "%s; key %s issued into Secret %s",
		cause.note, auth.DisplayPrefix(plaintext), k.Spec.SecretName)
}

// rotatedEvent says that spec.rotation replaced key previous (by its prefix).
func rotatedEvent(k *v1alpha1.ApiKey, previous string) *keyEvent {
	note := fmt.Sprintf("Rotation %d requested: key %s revoked", k.Spec.Rotation, previous)
	if grace := gracePeriod(k); grace > 0 {
		note = fmt.Sprintf("Rotation %d requested: key %s stays valid for %s", k.Spec.Rotation, previous, grace)
	}
	return &keyEvent{corev1.EventTypeNormal, "Rotated", "Rotate", note}
}

// foreignKeyEvent says that the Secret held key prefix, registered to another ApiKey. It names
// that ApiKey by the key's prefix only: the ApiKey may be in a namespace whose readers may not
// see it, and its administrators find it by the prefix.
func foreignKeyEvent(k *v1alpha1.ApiKey, prefix string) *keyEvent {
	return &keyEvent{corev1.EventTypeWarning, "ForeignKey", "Reissue",
		fmt.Sprintf("Secret %s held key %s, which is another ApiKey's (copied from its Secret?): it was not adopted "+
			"and stays that ApiKey's; rotate that ApiKey (kubectl get apikeys -A shows %s); this ApiKey's keys revoked",
			k.Spec.SecretName, prefix, prefix)}
}

// refuseSecretName reports that the Secret name is not k's: Ready=False/SecretConflict naming
// the ApiKey it is left to, and a Warning event when that changes (not on every retry).
func (r *APIKeyReconciler) refuseSecretName(k *v1alpha1.ApiKey, p keyPlan) {
	var message string
	switch {
	case p.owner == "":
		message = fmt.Sprintf("Secret %s exists and is not owned by this ApiKey: choose another secretName, "+
			"or delete the Secret; the key is issued as soon as the name is free", k.Spec.SecretName)
	case p.secret != nil:
		message = fmt.Sprintf("Secret %s belongs to ApiKey %s: choose another secretName; no key is issued here "+
			"while that Secret exists", k.Spec.SecretName, p.owner)
	default:
		message = fmt.Sprintf("Secret %s is missing and ApiKey %s, which names it too and comes first, creates it: "+
			"choose another secretName; no key is issued here", k.Spec.SecretName, p.owner)
	}
	before := meta.FindStatusCondition(k.Status.Conditions, v1alpha1.ConditionReady)
	if before == nil || before.Status != metav1.ConditionFalse || before.Reason != v1alpha1.ReasonSecretConflict ||
		before.Message != message {
		r.Recorder.Eventf(k, nil, corev1.EventTypeWarning, v1alpha1.ReasonSecretConflict, "Refuse", "%s", message)
	}
	setCondition(&k.Status.Conditions, k.Generation, v1alpha1.ConditionReady, false,
		v1alpha1.ReasonSecretConflict, message)
}

// issue generates a key, writes it to the Secret first (so the plaintext is never lost), then
// registers its digest, which revokes every previous key of this ApiKey (the one it replaces
// after grace, when positive). Once the key is registered it records cause, or Issued for a
// key issued for no other reason, naming the key: an event never announces an issue that
// might still fail.
func (r *APIKeyReconciler) issue(
	ctx context.Context, k *v1alpha1.ApiKey, existing *corev1.Secret, grace time.Duration, cause *keyEvent,
) (ctrl.Result, error) {
	plaintext, err := auth.GenerateKey(string(k.Spec.Environment))
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("generate key: %w", err)
	}
	issuedAt := time.Now().UTC().Format(time.RFC3339)
	secret := existing
	if secret == nil {
		secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Spec.SecretName}}
	}
	if secret.Annotations == nil {
		secret.Annotations = map[string]string{}
	}
	if secret.Labels == nil {
		secret.Labels = map[string]string{}
	}
	secret.Labels[ManagedByLabel] = ManagedByValue
	secret.Annotations[annotationRotation] = strconv.FormatInt(k.Spec.Rotation, 10)
	secret.Annotations[annotationIssuedAt] = issuedAt
	secret.Type = corev1.SecretTypeOpaque
	secret.Data = r.secretData(k, plaintext)
	if err := controllerutil.SetControllerReference(k, secret, r.Scheme()); err != nil {
		return ctrl.Result{}, fmt.Errorf("own key Secret: %w", err)
	}
	if existing == nil {
		err = r.Create(ctx, secret)
	} else {
		err = r.Update(ctx, secret)
	}
	if err != nil {
		return ctrl.Result{}, failed(v1alpha1.ReasonSecretError,
			fmt.Errorf("write key Secret %s: %w", k.Spec.SecretName, err))
	}
	if err := r.register(ctx, k, plaintext, k.Spec.Rotation, grace, false); err != nil {
		return ctrl.Result{}, err
	}
	r.recordIssued(k, cause, plaintext)
	if existing == nil && k.Status.KeyPrefix == "" {
		r.count(k, "issued")
	} else if k.Spec.Rotation > k.Status.Rotation {
		r.count(k, "rotated")
	} else {
		r.count(k, "reissued")
	}
	r.setIssued(k, plaintext, k.Spec.Rotation, issuedAt)
	return ctrl.Result{}, nil
}

// register stores the key for the ApiKey (revoked: only its digest, revoked, so that no ApiKey
// can register it as theirs).
func (r *APIKeyReconciler) register(
	ctx context.Context, k *v1alpha1.ApiKey, plaintext string, rotation int64, grace time.Duration, revoked bool,
) error {
	kind := string(k.Spec.Type)
	if kind == "" {
		kind = string(v1alpha1.ApiKeyTypeAPIKey)
	}
	_, err := r.Provisioner.RegisterKey(ctx, provisioning.Key{Namespace: k.Namespace, Partner: k.Spec.PartnerRef.Name,
		Environment: string(k.Spec.Environment), Kind: kind, Source: keySource(k), Rotation: rotation, Plaintext: plaintext,
		PreviousKeyGrace: grace, Revoked: revoked})
	switch {
	case errors.Is(err, provisioning.ErrPartnerNotProvisioned):
		return failed(v1alpha1.ReasonPartnerNotReady, fmt.Errorf("register key: %w", err))
	case err != nil:
		return failed(v1alpha1.ReasonDatabaseError, fmt.Errorf("register key: %w", err))
	}
	return nil
}

func (r *APIKeyReconciler) secretData(k *v1alpha1.ApiKey, plaintext string) map[string][]byte {
	kind := string(k.Spec.Type)
	if kind == "" {
		kind = string(v1alpha1.ApiKeyTypeAPIKey)
	}
	return map[string][]byte{
		SecretKeyAPIKey:      []byte(plaintext),
		SecretKeyEnvironment: []byte(k.Spec.Environment),
		SecretKeyBaseURL:     []byte(r.Options.BaseURLs[string(k.Spec.Environment)]),
		SecretKeyType:        []byte(kind),
	}
}

// refreshSecret keeps baseUrl and the descriptive keys current, and the operator's label on the
// Secret (key Secrets written by an older version lack it), without touching the key.
func (r *APIKeyReconciler) refreshSecret(ctx context.Context, k *v1alpha1.ApiKey, secret *corev1.Secret) error {
	want := r.secretData(k, string(secret.Data[SecretKeyAPIKey]))
	changed := secret.Labels[ManagedByLabel] != ManagedByValue
	for key, v := range want {
		if !bytes.Equal(secret.Data[key], v) {
			changed = true
		}
	}
	if !changed {
		return nil
	}
	secret.Data = want
	if secret.Labels == nil {
		secret.Labels = map[string]string{}
	}
	secret.Labels[ManagedByLabel] = ManagedByValue
	if err := r.Update(ctx, secret); err != nil {
		return failed(v1alpha1.ReasonSecretError, fmt.Errorf("update key Secret %s: %w", k.Spec.SecretName, err))
	}
	return nil
}

func (r *APIKeyReconciler) setIssued(k *v1alpha1.ApiKey, plaintext string, rotation int64, issuedAt string) {
	k.Status.KeyPrefix = auth.DisplayPrefix(plaintext)
	k.Status.Rotation = rotation
	if t, err := time.Parse(time.RFC3339, issuedAt); err == nil {
		mt := metav1.NewTime(t)
		k.Status.IssuedAt = &mt
	}
	setCondition(&k.Status.Conditions, k.Generation, v1alpha1.ConditionReady, true, v1alpha1.ReasonReconciled,
		fmt.Sprintf("Key %s active; plaintext in Secret %s", k.Status.KeyPrefix, k.Spec.SecretName))
}

// SetupWithManager watches ApiKeys, the Secrets they own, their Partners, any Secret their
// secretName names (owned or not: a conflicting Secret's deletion or hand-over frees the name;
// through both caches), and the other ApiKeys naming the same Secret (the deletion of the one
// the name is left to passes it on).
func (r *APIKeyReconciler) SetupWithManager(mgr ctrl.Manager, refs referenceCache) error {
	ctx := context.Background()
	indexer := mgr.GetFieldIndexer()
	if err := indexer.IndexField(ctx, &v1alpha1.ApiKey{}, indexSecretName, apiKeySecretName); err != nil {
		return fmt.Errorf("index ApiKeys by secretName: %w", err)
	}
	if err := indexer.IndexField(ctx, &v1alpha1.ApiKey{}, indexPartnerRef, func(o client.Object) []string {
		return []string{o.(*v1alpha1.ApiKey).Spec.PartnerRef.Name}
	}); err != nil {
		return fmt.Errorf("index ApiKeys by partnerRef: %w", err)
	}
	if err := indexer.IndexField(ctx, &corev1.Secret{}, indexKeyDigest, secretKeyDigest); err != nil {
		return fmt.Errorf("index key Secrets by key digest: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.ApiKey{}).
		Owns(&corev1.Secret{}).
		Watches(&v1alpha1.Partner{}, handler.EnqueueRequestsFromMapFunc(
			func(ctx context.Context, p client.Object) []reconcile.Request {
				return referrers(ctx, r.Client, &v1alpha1.ApiKeyList{}, indexPartnerRef, p)
			})).
		Watches(&v1alpha1.ApiKey{}, handler.EnqueueRequestsFromMapFunc(
			func(ctx context.Context, o client.Object) []reconcile.Request {
				k := o.(*v1alpha1.ApiKey)
				named := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
					Namespace: k.Namespace, Name: k.Spec.SecretName}}
				return referrers(ctx, r.Client, &v1alpha1.ApiKeyList{}, indexSecretName, named)
			})).
		// The key Secrets in the manager's cache wake every ApiKey naming them, not only their
		// owner: an ApiKey woken by the reference cache may have read this cache before it saw
		// the change (the owner's Secret deleted), and this event is its next look.
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(
			func(ctx context.Context, s client.Object) []reconcile.Request {
				return referrers(ctx, r.Client, &v1alpha1.ApiKeyList{}, indexSecretName, s)
			})).
		WatchesRawSource(source.Kind(refs, metadataOf("Secret"), handler.TypedEnqueueRequestsFromMapFunc(
			func(ctx context.Context, s *metav1.PartialObjectMetadata) []reconcile.Request {
				return referrers(ctx, r.Client, &v1alpha1.ApiKeyList{}, indexSecretName, s)
			}))).
		Named("apikey").
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Options.Concurrency}).
		Complete(r)
}
