package controllers_test

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/auth"
	"github.com/codeport/codeport/internal/test/poll"
)

// TestRotationGracePeriod: with spec.previousKeyGracePeriod, a rotation leaves the previous key
// working until the time status shows and refuses it from then on; the operator then records it
// revoked and clears the status. With the grace period back at 0, the next rotation revokes the
// previous key at once.
func TestRotationGracePeriod(t *testing.T) {
	ns := namespace(t)
	_, key := onboard(t, ns)
	var k v1alpha1.ApiKey
	update(t, ns, "acme-production", &k, func() {
		k.Spec.PreviousKeyGracePeriod = &metav1.Duration{Duration: 4 * time.Second}
		k.Spec.Rotation = 1
	})
	rotated := secretKey(t, ns, "acme-production-key", key)
	var end time.Time
	poll.Until(t, 3*time.Second, "status shows the previous key", func() (bool, string) {
		get(t, ns, "acme-production", &k)
		if k.Status.PreviousKeyExpiresAt == nil || k.Status.PreviousKeyPrefix != auth.DisplayPrefix(key) {
			return false, fmt.Sprintf("%+v", k.Status)
		}
		end = k.Status.PreviousKeyExpiresAt.Time
		return true, ""
	})

	// Both keys work through the grace period; the old one is refused from its end on. Status
	// shows the end to the second, rounded down: the key ends within that second.
	var lastAccepted, refused time.Time
	poll.Until(t, timeout, "previous key refused", func() (bool, string) {
		old, current := ping(t, "production", key), ping(t, "production", rotated)
		switch {
		case old == 200:
			lastAccepted = time.Now()
		case old == 401 && current == 200:
			refused = time.Now()
			return true, ""
		}
		time.Sleep(50 * time.Millisecond)
		return false, fmt.Sprintf("old %d new %d", old, current)
	})
	if lastAccepted.IsZero() || lastAccepted.Before(end.Add(-time.Second)) {
		t.Fatalf("grace period ends %s; the previous key was last accepted at %s", end, lastAccepted)
	}
	if refused.Before(end) || refused.After(end.Add(3*time.Second)) {
		t.Fatalf("grace period ends %s; the previous key was first refused at %s", end, refused)
	}

	// The operator records the end: revoked in the database, status cleared, an event.
	poll.Until(t, timeout, "previous key settled", func() (bool, string) {
		get(t, ns, "acme-production", &k)
		exists, active := keyState(t, key)
		return exists && !active && k.Status.PreviousKeyPrefix == "" && k.Status.PreviousKeyExpiresAt == nil,
			fmt.Sprintf("exists %v active %v status %+v", exists, active, k.Status)
	})
	waitEvent(t, ns, "ApiKey", "acme-production", "Normal PreviousKeyRevoked: Key "+auth.DisplayPrefix(key)+" revoked")
	if ping(t, "production", rotated) != 200 {
		t.Fatal("the current key stopped working with the previous one")
	}

	// Grace period 0: the contract's immediate revocation.
	update(t, ns, "acme-production", &k, func() {
		k.Spec.PreviousKeyGracePeriod = nil
		k.Spec.Rotation = 2
	})
	again := secretKey(t, ns, "acme-production-key", rotated)
	// The API learns of both keys by notification: milliseconds, or seconds on a busy machine.
	// "At once" is the status check below: no grace period is recorded.
	poll.Until(t, timeout, "previous key refused at once", func() (bool, string) {
		o, n := ping(t, "production", rotated), ping(t, "production", again)
		return o == 401 && n == 200, fmt.Sprintf("old %d new %d", o, n)
	})
	get(t, ns, "acme-production", &k)
	if k.Status.PreviousKeyExpiresAt != nil {
		t.Fatalf("a rotation without grace period shows a previous key: %+v", k.Status)
	}
}
