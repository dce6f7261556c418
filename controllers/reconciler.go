package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/codeport/codeport/api/v1alpha1"
)

// Finalizer guards the data-plane side of Partner, Catalog and ApiKey: revoking keys and
// suspending accounts must happen before the resource disappears.
const Finalizer = "codeport.dev/finalizer"

// withFinalizer is the skeleton shared by the kinds that have a data-plane side to undo:
// deletion runs finalize and releases the finalizer; otherwise the finalizer is ensured and
// the resource applied with one status write.
func withFinalizer(ctx context.Context, c client.Client, obj client.Object, finalize func(context.Context) error,
	apply func(context.Context) (ctrl.Result, error), observe func()) (ctrl.Result, error) {
	if !obj.GetDeletionTimestamp().IsZero() {
		if err := finalize(ctx); err != nil {
			return reportFailure(ctx, c, obj, failed(v1alpha1.ReasonDeleting,
				fmt.Errorf("deletion waits until the data plane is updated: %w", err)))
		}
		if controllerutil.RemoveFinalizer(obj, Finalizer) {
			return ctrl.Result{}, c.Update(ctx, obj)
		}
		return ctrl.Result{}, nil
	}
	if controllerutil.AddFinalizer(obj, Finalizer) {
		if err := c.Update(ctx, obj); err != nil {
			return reportFailure(ctx, c, obj, fmt.Errorf("add finalizer: %w", err))
		}
	}
	return applyWithStatus(ctx, c, obj, apply, observe)
}

// reportFailure records a failure outside apply (finalizer, finalize) in the status.
func reportFailure(ctx context.Context, c client.Client, obj client.Object, err error) (ctrl.Result, error) {
	fail := func(context.Context) (ctrl.Result, error) { return ctrl.Result{}, err }
	return applyWithStatus(ctx, c, obj, fail, func() {})
}

// applyWithStatus runs apply and writes the status it computed, once, as a patch, and only when
// something in it changed: a reconcile with nothing to change writes nothing.
//
// The status tells the truth: when apply fails, Ready is False for the current generation, with
// the failure's reason (see failed) and its error as the message; observe (which advances
// status.observedGeneration) runs only when apply succeeded and left Ready True for the current
// generation, so observedGeneration is the last generation applied in full. Each condition
// carries the generation it speaks of.
func applyWithStatus(ctx context.Context, c client.Client, obj client.Object,
	apply func(context.Context) (ctrl.Result, error), observe func()) (ctrl.Result, error) {
	before, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return ctrl.Result{}, fmt.Errorf("%T does not copy into a client.Object", obj)
	}
	result, reconcileErr := apply(ctx)
	conditions, generation := conditionsOf(obj), obj.GetGeneration()
	switch {
	case reconcileErr != nil && superseded(reconcileErr):
	case reconcileErr != nil:
		if conditions != nil {
			setCondition(conditions, generation, v1alpha1.ConditionReady, false,
				failureReason(reconcileErr), errorMessage(reconcileErr))
		}
	case conditions != nil:
		ready := meta.FindStatusCondition(*conditions, v1alpha1.ConditionReady)
		if ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == generation {
			observe()
		}
	}
	if err := patchStatus(ctx, c, before, obj); err != nil {
		return ctrl.Result{}, errors.Join(reconcileErr, err)
	}
	if reconcileErr != nil && superseded(reconcileErr) {
		// Not a failure: the newer object's watch event queues the next reconcile, and the
		// requeue is the backstop. Returning the error would log a stale read as an error.
		return ctrl.Result{RequeueAfter: supersededRetry}, nil
	}
	return result, reconcileErr
}

// supersededRetry is how soon a reconcile that read a stale object runs again.
const supersededRetry = 200 * time.Millisecond
