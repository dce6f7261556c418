package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/provisioning"
)

// setCondition records a condition for the resource's current generation.
func setCondition(
	conditions *[]metav1.Condition, generation int64, conditionType string, ok bool, reason, message string,
) {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(conditions, metav1.Condition{Type: conditionType, Status: status, Reason: reason,
		Message: message, ObservedGeneration: generation})
}

// partnerReady reports whether the Partner a resource refers to exists and is provisioned; the
// reason and message say what to fix otherwise.
func partnerReady(p *v1alpha1.Partner, found bool) (ok bool, reason, message string) {
	switch {
	case !found:
		return false, v1alpha1.ReasonPartnerNotFound, "Partner not found in this namespace"
	case !p.DeletionTimestamp.IsZero():
		return false, v1alpha1.ReasonPartnerNotReady, "Partner is being deleted"
	case p.Status.Accounts.Sandbox == "" || p.Status.Accounts.Production == "":
		return false, v1alpha1.ReasonPartnerNotReady, "Partner has not been provisioned yet"
	}
	return true, "", ""
}

// reasonError is a reconcile error with the reason its Ready=False condition reports.
type reasonError struct {
	reason string
	err    error
}

func (e *reasonError) Error() string { return e.err.Error() }
func (e *reasonError) Unwrap() error { return e.err }

// failed gives err the reason its Ready=False condition reports (a v1alpha1.Reason*).
func failed(reason string, err error) error {
	if err == nil {
		return nil
	}
	return &reasonError{reason: reason, err: err}
}

// failureReason is the Ready reason of a failed reconcile: the one given with failed, else
// DatabaseError for an error the database returned or a failed connection to it, else
// ReconcileError.
func failureReason(err error) string {
	var re *reasonError
	if errors.As(err, &re) {
		return re.reason
	}
	if provisioning.IsDatabaseError(err) {
		return v1alpha1.ReasonDatabaseError
	}
	return v1alpha1.ReasonReconcileError
}

// superseded reports whether err only says that the object read was not the latest (a write
// conflict, or a create racing another): the reconcile is retried with the newer object and
// nothing failed, so Ready is left as it is.
func superseded(err error) bool { return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) }

// listed joins the first max items of a list a condition message names, then says how many more
// there are: the message stays readable, and within its bound, however long the list.
func listed(items []string, max int) string {
	if len(items) <= max {
		return strings.Join(items, "; ")
	}
	return strings.Join(items[:max], "; ") + fmt.Sprintf("; and %d more", len(items)-max)
}

// maxMessage bounds a condition message that carries an error.
const maxMessage = 1024

func errorMessage(err error) string {
	msg := err.Error()
	if len(msg) > maxMessage {
		msg = msg[:maxMessage-3] + "..."
	}
	return msg
}

// conditionsOf returns the conditions of one of the kinds (nil for any other object).
func conditionsOf(obj client.Object) *[]metav1.Condition {
	switch o := obj.(type) {
	case *v1alpha1.Partner:
		return &o.Status.Conditions
	case *v1alpha1.Catalog:
		return &o.Status.Conditions
	case *v1alpha1.ApiKey:
		return &o.Status.Conditions
	case *v1alpha1.Wallet:
		return &o.Status.Conditions
	case *v1alpha1.WalletTopUp:
		return &o.Status.Conditions
	}
	return nil
}

// patchStatus writes obj's status as a merge patch against before, unless nothing changed.
func patchStatus(ctx context.Context, c client.Client, before, obj client.Object) error {
	patch := client.MergeFrom(before)
	data, err := patch.Data(obj)
	if err != nil {
		return fmt.Errorf("status patch of %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	if string(data) == "{}" {
		return nil
	}
	if err := c.Status().Patch(ctx, obj, patch); err != nil {
		return fmt.Errorf("update status of %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}
