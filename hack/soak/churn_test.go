//go:build soak

package soak

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/auth"
	"github.com/codeport/codeport/internal/tenancy"
	"github.com/codeport/codeport/internal/test/poll"
)

// Messages of the refusals the churn causes (the contract's texts).
const (
	msgInvalidKey = "Invalid API key"
	msgSuspended  = "Your account is suspended. Contact support for assistance."
)

// revocationLimit is the contract's bound: a rotated or deleted key is refused, and a new key
// accepted, on every replica within a second.
const revocationLimit = time.Second

// churn is what platform engineers do while partners place orders: top-ups, key rotations, a
// key deleted, a price change, a partner suspended and resumed, the leader operator and one
// API replica killed. It records what it did, how long each change took to be seen, and which
// keys it retired, so that the refusals it causes can be told apart from defects.
type churn struct {
	c        *cluster
	l        *load
	start    func() (*process, error) // starts a replacement operator
	duration time.Duration
	machine  *loadAverage

	mu sync.Mutex
	// churned are keys retired by a rotation or a deletion, and keys newly issued by one (refused
	// until registered): a 401 with any other key is a defect.
	churned map[string]bool
	// probes are the churn's own requests.
	probes []result
	// events are the lines of the churn's log, with what was measured.
	events   []string
	failures []string
	topUps   int
	// editedAt is when the price change was written.
	editedAt time.Time
}

func (ch *churn) logf(format string, args ...any) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.events = append(ch.events,
		fmt.Sprintf("%6.1fs  ", time.Since(ch.l.startedAt()).Seconds())+fmt.Sprintf(format, args...))
}

func (ch *churn) failf(format string, args ...any) {
	ch.mu.Lock()
	ch.failures = append(ch.failures, fmt.Sprintf(format, args...))
	ch.mu.Unlock()
	ch.logf("FAILED: "+format, args...)
}

func (ch *churn) retire(keys ...string) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	for _, k := range keys {
		ch.churned[k] = true
	}
}

func (ch *churn) isChurned(key string) bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.churned[key]
}

// run carries out the schedule, each step at its share of the phase's duration (later when an
// earlier step took longer), and returns when all are done.
func (ch *churn) run(ctx context.Context) {
	begin := time.Now()
	steps := []struct {
		at   float64
		name string
		do   func(context.Context) error
	}{
		{0.05, "top-ups on every Wallet", ch.topUp},
		{0.10, "rotate " + partnerName(rotatedA) + " production key", func(ctx context.Context) error {
			return ch.rotate(ctx, ch.l.partners[rotatedA], string(tenancy.Production))
		}},
		{0.15, "rotate " + partnerName(rotatedSandbox) + " sandbox key", func(ctx context.Context) error {
			return ch.rotate(ctx, ch.l.partners[rotatedSandbox], string(tenancy.Sandbox))
		}},
		{0.20, "price change in Catalog edit", ch.editPrice},
		{0.28, "suspend and resume " + partnerName(suspended), ch.suspendResume},
		{0.38, "top-ups on every Wallet", ch.topUp},
		{0.42, "SIGKILL the leader operator", ch.killLeader},
		{0.55, "rotate " + partnerName(rotatedB) + " production key", func(ctx context.Context) error {
			return ch.rotate(ctx, ch.l.partners[rotatedB], string(tenancy.Production))
		}},
		{0.60, "delete ApiKey " + keyName(deleted, string(tenancy.Production)), ch.deleteKey},
		{0.68, "top-ups on every Wallet", ch.topUp},
		{0.72, "SIGKILL production replica " + ch.l.production[1].name, ch.killReplica},
	}
	for _, s := range steps {
		if err := sleepErr(ctx, time.Until(begin.Add(time.Duration(s.at*float64(ch.duration))))); err != nil {
			ch.failf("%s: not run: %v", s.name, err)
			continue
		}
		started := time.Now()
		ch.logf("%s", s.name)
		if err := s.do(ctx); err != nil {
			ch.failf("%s: %v", s.name, err)
			continue
		}
		ch.logf("  done in %s", time.Since(started).Round(time.Millisecond))
	}
}

func (ch *churn) topUp(ctx context.Context) error {
	ch.topUps++
	return ch.c.topUpRound(ctx, ch.topUps)
}

// rotate raises spec.rotation and, from the moment the Secret holds the new key, probes every
// replica of the environment every 50 ms until the new key is accepted and the old one refused
// with 401 Invalid API key.
func (ch *churn) rotate(ctx context.Context, p *partner, environment string) error {
	old := p.key(environment)
	name := keyName(p.idx, environment)
	secrets, err := ch.c.k8s.Watch(ctx, &corev1.SecretList{}, client.InNamespace(namespace),
		client.MatchingFields{"metadata.name": name + "-key"})
	if err != nil {
		return fmt.Errorf("watch secret: %w", err)
	}
	defer secrets.Stop()
	ch.retire(old)
	k := &v1alpha1.ApiKey{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := ch.c.update(ctx, k, func() { k.Spec.Rotation++ }); err != nil {
		return err
	}
	fresh, err := awaitSecretChange(ctx, secrets, old)
	if err != nil {
		return err
	}
	changed := time.Now()
	ch.retire(fresh)
	// The partner's client reads its Secret again, as a mounted Secret is refreshed.
	p.keys[environment].Store(&fresh)
	ch.logf("  Secret %s-key holds %s (was %s)", name, auth.DisplayPrefix(fresh), auth.DisplayPrefix(old))
	took := ch.probeEach(ctx, ch.replicasOf(environment), func(ctx context.Context, r *replica) (time.Duration, error) {
		var wg sync.WaitGroup
		var tNew, tOld time.Duration
		var errNew, errOld error
		wg.Add(2)
		go func() {
			defer wg.Done()
			tNew, errNew = ch.probeUntil(ctx, r, p, environment, fresh, changed, 50*time.Millisecond, accepted)
		}()
		go func() {
			defer wg.Done()
			tOld, errOld = ch.probeUntil(ctx, r, p, environment, old, changed, 50*time.Millisecond, keyRefused)
		}()
		wg.Wait()
		if errNew != nil || errOld != nil {
			return max(tNew, tOld), errors.Join(wrapIf("new key", errNew), wrapIf("old key", errOld))
		}
		// Once refused, the old key stays refused.
		if a := ch.probe(ctx, r, p, environment, old); !keyRefused(a) {
			return max(tNew, tOld), fmt.Errorf("old key accepted again: %d %s", a.status, a.message)
		}
		return max(tNew, tOld), nil
	})
	for r, d := range took {
		ch.logf("  %s: new key accepted and old key refused %s after the Secret changed", r, d.Round(time.Millisecond))
		if d > revocationLimit {
			ch.failf("rotation of %s: %s took %s to accept the new key and refuse the old one (limit %s)",
				name, r, d.Round(time.Millisecond), revocationLimit)
		}
	}
	return nil
}

// wrapIf prefixes err with what, or is nil when err is.
func wrapIf(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

func awaitSecretChange(ctx context.Context, w watch.Interface, old string) (string, error) {
	timeout := time.After(60 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return "", fmt.Errorf("secret watch closed")
			}
			if s, isSecret := ev.Object.(*corev1.Secret); isSecret && ev.Type != watch.Deleted {
				if k := string(s.Data["apiKey"]); k != "" && k != old {
					return k, nil
				}
			}
		case <-timeout:
			return "", fmt.Errorf("the Secret did not change within 60 s")
		case <-ctx.Done():
			return "", fmt.Errorf("waiting for the Secret: %w", ctx.Err())
		}
	}
}

// deleteKey deletes a production ApiKey; once it is gone (the operator released its finalizer
// after revoking the key) the key must be refused on every replica within a second.
func (ch *churn) deleteKey(ctx context.Context) error {
	p := ch.l.partners[deleted]
	key := p.key(string(tenancy.Production))
	ch.retire(key)
	k := &v1alpha1.ApiKey{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: keyName(deleted, string(tenancy.Production))},
	}
	if err := ch.c.k8s.Delete(ctx, k); err != nil {
		return fmt.Errorf("delete ApiKey: %w", err)
	}
	err := poll.Wait(ctx, pollPause, 60*time.Second, "ApiKey gone", func() (bool, string) {
		err := ch.c.k8s.Get(ctx, client.ObjectKeyFromObject(k), k)
		return apierrors.IsNotFound(err), fmt.Sprintf("finalizers %v", k.Finalizers)
	})
	if err != nil {
		return err
	}
	gone := time.Now()
	took := ch.probeEach(ctx, ch.l.production, func(ctx context.Context, r *replica) (time.Duration, error) {
		return ch.probeUntil(ctx, r, p, string(tenancy.Production), key, gone, 50*time.Millisecond, keyRefused)
	})
	p.keys[string(tenancy.Production)].Store(nil)
	for r, d := range took {
		ch.logf("  %s: deleted key refused %s after the ApiKey was gone", r, d.Round(time.Millisecond))
		if d > revocationLimit {
			ch.failf("deleted ApiKey: %s took %s to refuse its key (limit %s)", r, d.Round(time.Millisecond), revocationLimit)
		}
	}
	return nil
}

// suspendResume suspends a partner until every replica refuses both its keys, holds two
// seconds, and resumes it until every replica accepts them again. Probes run every 200 ms: the
// refusals count against the client IP's budget, which every partner of this run shares.
func (ch *churn) suspendResume(ctx context.Context) error {
	p := ch.l.partners[suspended]
	obj := &v1alpha1.Partner{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: p.name}}
	for _, suspend := range []bool{true, false} {
		if err := ch.c.update(ctx, obj, func() { obj.Spec.Suspended = suspend }); err != nil {
			return err
		}
		since := time.Now()
		want, what := accepted, "accepted again"
		if suspend {
			want, what = refusedAs(http.StatusForbidden, msgSuspended), "refused as suspended"
		}
		var targets []*replica
		envs := map[*replica]string{}
		for _, env := range environments {
			for _, r := range ch.replicasOf(env) {
				targets, envs[r] = append(targets, r), env
			}
		}
		took := ch.probeEach(ctx, targets, func(ctx context.Context, r *replica) (time.Duration, error) {
			return ch.probeUntil(ctx, r, p, envs[r], p.key(envs[r]), since, 200*time.Millisecond, want)
		})
		for r, d := range took {
			ch.logf("  %s: %s %s after the Partner update", r, what, d.Round(time.Millisecond))
		}
		if suspend {
			sleep(ctx, 2*time.Second)
		}
	}
	return nil
}

// editPrice changes plentiful's price in Catalog edit and waits until both production replicas
// serve the new price.
func (ch *churn) editPrice(ctx context.Context) error {
	cat := &v1alpha1.Catalog{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "edit"}}
	err := ch.c.update(ctx, cat, func() {
		for i := range cat.Spec.Products {
			if cat.Spec.Products[i].ProductCode == plentiful {
				price := int64(editedPrice)
				cat.Spec.Products[i].Price = &price
			}
		}
	})
	if err != nil {
		return err
	}
	ch.mu.Lock()
	ch.editedAt = time.Now()
	since := ch.editedAt
	ch.mu.Unlock()
	p := ch.l.partners[edited]
	took := ch.probeEach(ctx, ch.l.production, func(ctx context.Context, r *replica) (time.Duration, error) {
		var last answer
		err := poll.Wait(ctx, pollPause, 30*time.Second, "new price on "+r.name, func() (bool, string) {
			last = ch.l.do(ctx, r, p.key(string(tenancy.Production)), http.MethodGet, "/v2/catalog/products/"+plentiful, nil)
			ch.record(last, p, string(tenancy.Production))
			return last.status == http.StatusOK && last.price == editedPrice, fmt.Sprintf("%d price %d", last.status, last.price)
		})
		return time.Since(since), err
	})
	for r, d := range took {
		ch.logf("  %s serves the new price %s after the Catalog update", r, d.Round(time.Millisecond))
	}
	return nil
}

// killLeader kills the operator holding the lease with SIGKILL, starts a replacement so that
// two keep running, and waits until one of them leads.
func (ch *churn) killLeader(ctx context.Context) error {
	leader, err := ch.c.waitLeader(ctx, 30*time.Second)
	if err != nil {
		return err
	}
	killed := time.Now()
	leader.Kill()
	ch.logf("  killed %s", leader.Name)
	if _, err := ch.start(); err != nil {
		return err
	}
	next, err := ch.c.waitLeader(ctx, 90*time.Second)
	if err != nil {
		return err
	}
	ch.logf("  %s leads %s after the kill", next.Name, time.Since(killed).Round(time.Millisecond))
	return nil
}

// killReplica kills one production replica with SIGKILL and starts it again at once.
func (ch *churn) killReplica(ctx context.Context) error {
	r := ch.l.production[1]
	took, err := r.restart(ctx)
	if err != nil {
		return err
	}
	ch.logf("  %s ready again %s after the kill", r.name, took.Round(time.Millisecond))
	return nil
}

func (ch *churn) replicasOf(environment string) []*replica {
	if environment == string(tenancy.Sandbox) {
		return []*replica{ch.l.sandbox}
	}
	return ch.l.production
}

// probeEach runs probe against every replica at once and returns how long each took; errors
// are failures.
func (ch *churn) probeEach(
	ctx context.Context, replicas []*replica, probe func(context.Context, *replica) (time.Duration, error),
) map[string]time.Duration {
	var wg sync.WaitGroup
	var mu sync.Mutex
	out := map[string]time.Duration{}
	for _, r := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := probe(ctx, r)
			if err != nil {
				ch.failf("%s: %v", r.name, err)
			}
			mu.Lock()
			out[r.name] = d
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

func accepted(a answer) bool { return a.status == http.StatusOK }

func refusedAs(status int, message string) func(answer) bool {
	return func(a answer) bool { return a.status == status && a.message == message }
}

// keyRefused holds for an answer that refuses the key as invalid.
func keyRefused(a answer) bool { return refusedAs(http.StatusUnauthorized, msgInvalidKey)(a) }

// probeUntil pings replica r with key every interval until want holds, for at most 15 s, and
// returns the time from since to the answer that satisfied it.
func (ch *churn) probeUntil(
	ctx context.Context, r *replica, p *partner, environment, key string, since time.Time, interval time.Duration,
	want func(answer) bool,
) (time.Duration, error) {
	deadline := time.Now().Add(15 * time.Second)
	jitter := time.Duration(rand.Int64N(int64(interval)))
	sleep(ctx, jitter/4)
	for {
		a := ch.probe(ctx, r, p, environment, key)
		if want(a) {
			return a.start.Add(a.dur).Sub(since), nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return time.Since(since), fmt.Errorf("still %d %q after %s",
				a.status, a.message+a.err, time.Since(since).Round(time.Millisecond))
		}
		sleep(ctx, interval)
	}
}

func (ch *churn) probe(ctx context.Context, r *replica, p *partner, environment, key string) answer {
	a := ch.l.do(ctx, r, key, http.MethodGet, "/v2/ping", nil)
	ch.record(a, p, environment)
	return a
}

func (ch *churn) record(a answer, p *partner, environment string) {
	a.phase, a.partner, a.env, a.op = int(ch.l.phase.Load()), p.idx, environment, opProbe
	ch.mu.Lock()
	ch.probes = append(ch.probes, a.result)
	ch.mu.Unlock()
}
