package controllers

import (
	"context"
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/codeport/codeport/api/v1alpha1"
)

// TestStaleReadIsNotAFailure: a reconcile whose write lost to a newer version of the object is
// retried soon, reports no error (so nothing is logged as one) and leaves Ready as it was; any
// other failure is returned and sets Ready=False.
func TestStaleReadIsNotAFailure(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(scheme)
	gr := schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "wallets"}
	for _, tc := range []struct {
		name      string
		err       error
		wantError bool
		wantReady metav1.ConditionStatus
	}{
		{"conflict", apierrors.NewConflict(gr, "acme-production", errors.New("the object has been modified")),
			false, metav1.ConditionTrue},
		{"already exists", apierrors.NewAlreadyExists(gr, "acme-production"), false, metav1.ConditionTrue},
		{"database down", errors.New("connect: connection refused"), true, metav1.ConditionFalse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &v1alpha1.Wallet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "acme-production", Generation: 2}}
			meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady,
				Status: metav1.ConditionTrue, Reason: "Applied", ObservedGeneration: 2})
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(w).WithStatusSubresource(w).Build()
			res, err := applyWithStatus(context.Background(), c, w,
				func(context.Context) (ctrl.Result, error) { return ctrl.Result{}, tc.err }, func() {})
			if (err != nil) != tc.wantError {
				t.Fatalf("error %v, want error: %v", err, tc.wantError)
			}
			if !tc.wantError && res.RequeueAfter <= 0 {
				t.Errorf("a stale read is not retried: %+v", res)
			}
			if got := meta.FindStatusCondition(w.Status.Conditions, v1alpha1.ConditionReady); got.Status != tc.wantReady {
				t.Errorf("Ready %s (%s), want %s", got.Status, got.Reason, tc.wantReady)
			}
		})
	}
}
