//go:build soak

package soak

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/tenancy"
	"github.com/codeport/codeport/internal/test/poll"
	"github.com/codeport/codeport/internal/test/testfixture"
	"github.com/codeport/codeport/internal/test/testkube"
)

// namespace holds every partner resource of the run.
const namespace = "partners"

// Products of both catalogs. plentiful has stock for every order the run places; scarce runs
// out during the run, so later orders of it finish partially or failed and are refunded.
const (
	plentiful      = "10000000000001"
	scarce         = "10000000000002"
	plentifulPrice = 2000
	scarcePrice    = 500
	// editedPrice is plentiful's price in the edited catalog after the price change.
	editedPrice = 2200
)

// The roles partners play in the churn; the others only carry traffic.
const (
	// partnersCount partners are onboarded.
	partnersCount = 20
	// edited and editedToo order from catalog "edit", whose price is changed during the run.
	edited, editedToo = 0, 10
	// rotatedA and rotatedB have their production key rotated, rotatedSandbox its sandbox key;
	// rotatedB after the leader operator was killed.
	rotatedA, rotatedB, rotatedSandbox = 1, 5, 2
	// suspended is suspended and resumed.
	suspended = 4
	// deleted has its production ApiKey deleted.
	deleted = 6
	// limited has a rate limit the load exceeds: its 429s are expected.
	limited       = 8
	limitedPerMin = 120
	// poor starts with a small production wallet: its 422s are expected until top-ups arrive.
	poor = 9
)

// partner is one onboarded partner and the keys the load uses now.
type partner struct {
	idx  int
	name string
	// keys by environment; swapped when a rotation is seen in the Secret, nil once deleted.
	keys map[string]*atomic.Pointer[string]
	// refusedUntil (unix ns) keeps the load off the partner for a moment after a 401 or 403, as
	// a client that does not retry refusals would.
	refusedUntil atomicTime
	// price is the unit price of plentiful as the partner last read it from the catalog.
	price atomic.Int64
	// accounts by environment.
	accounts map[string]uuid.UUID
}

func (p *partner) key(environment string) string {
	if k := p.keys[environment].Load(); k != nil {
		return *k
	}
	return ""
}

func partnerName(i int) string { return fmt.Sprintf("p%02d", i) }

func catalogOf(i int) string {
	if i == edited || i == editedToo {
		return "edit"
	}
	return "main"
}

func catalogObj(name string, price int64) *v1alpha1.Catalog {
	gaming := func(p *v1alpha1.CatalogProduct) {
		p.MainCategory, p.Tags = "Gaming", []string{"gaming"}
		p.Languages = []v1alpha1.ProductLanguage{{LanguageCode: "en", Name: "English"}}
	}
	return testfixture.Catalog(name, testfixture.InNamespace(namespace), testfixture.WithDescription("Soak "+name, 0),
		testfixture.WithProducts(
			testfixture.Product(plentiful, testfixture.WithName("Credit 20 EUR", "Soak"), testfixture.WithPrice(price), gaming),
			testfixture.Product(scarce, testfixture.WithName("Credit 5 EUR", "Soak"), testfixture.WithPrice(scarcePrice),
				gaming),
		))
}

func partnerObj(i int) *v1alpha1.Partner {
	perMinute := int32(1_000_000)
	if i == limited {
		perMinute = limitedPerMin
	}
	on := true
	return testfixture.Partner(partnerName(i), testfixture.InNamespace(namespace),
		testfixture.WithContact("Soak partner "+partnerName(i), partnerName(i)+"@soak.example"),
		testfixture.WithCatalogRef(catalogOf(i)), testfixture.WithAllowlist("127.0.0.1/32"),
		testfixture.WithRateLimit(perMinute),
		testfixture.WithOrdering(&v1alpha1.OrderingSpec{Enabled: &on, WalletEnabled: &on}))
}

func keyName(i int, environment string) string { return partnerName(i) + "-" + environment }

func walletObj(i int, environment string) *v1alpha1.Wallet {
	amount := "1000000.00"
	switch {
	case environment == string(tenancy.Sandbox):
		amount = "100000.00"
	case i == poor:
		amount = "100.00"
	}
	opening := testfixture.TopUp("opening", "EUR", amount)
	opening.Note = "opening balance"
	return testfixture.Wallet(partnerName(i), environment, testfixture.InNamespace(namespace),
		testfixture.WithThreshold("100.00"), testfixture.WithTopUps(opening))
}

var environments = []string{string(tenancy.Production), string(tenancy.Sandbox)}

// onboard creates the catalogs, partners, keys and wallets through the Kubernetes API only,
// waits until the operator has provisioned them, and reads the keys from their Secrets.
func (c *cluster) onboard(ctx context.Context) ([]*partner, error) {
	objs := []client.Object{catalogObj("main", plentifulPrice), catalogObj("edit", plentifulPrice)}
	for i := range partnersCount {
		objs = append(objs, partnerObj(i))
		for _, env := range environments {
			objs = append(objs, testfixture.APIKey(partnerName(i), env, testfixture.InNamespace(namespace)), walletObj(i, env))
		}
	}
	for _, o := range objs {
		if err := c.k8s.Create(ctx, o); err != nil {
			return nil, fmt.Errorf("create %T %s: %w", o, o.GetName(), err)
		}
	}
	partners := make([]*partner, partnersCount)
	for i := range partners {
		p := &partner{
			idx:      i,
			name:     partnerName(i),
			keys:     map[string]*atomic.Pointer[string]{},
			accounts: map[string]uuid.UUID{},
		}
		p.price.Store(plentifulPrice)
		var pr v1alpha1.Partner
		err := poll.Wait(ctx, pollPause, 60*time.Second, "partner "+p.name+" ready", func() (bool, string) {
			if err := c.k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: p.name}, &pr); err != nil {
				return false, err.Error()
			}
			return testkube.ReadyNow(pr.Status.Conditions, pr.Generation)
		})
		if err != nil {
			return nil, err
		}
		for env, id := range map[string]string{
			string(tenancy.Production): pr.Status.Accounts.Production,
			string(tenancy.Sandbox):    pr.Status.Accounts.Sandbox,
		} {
			if p.accounts[env], err = uuid.Parse(id); err != nil {
				return nil, fmt.Errorf("partner %s account %s: %w", p.name, env, err)
			}
		}
		for _, env := range environments {
			key, err := c.waitKey(ctx, i, env, "")
			if err != nil {
				return nil, err
			}
			p.keys[env] = &atomic.Pointer[string]{}
			p.keys[env].Store(&key)
			if err := c.waitWallet(ctx, keyName(i, env), 1); err != nil {
				return nil, err
			}
		}
		partners[i] = p
	}
	return partners, nil
}

// waitKey waits until the ApiKey is Ready and its Secret holds a key other than notEqual.
func (c *cluster) waitKey(ctx context.Context, i int, environment, notEqual string) (string, error) {
	var key string
	err := poll.Wait(ctx, pollPause, 60*time.Second, "key "+keyName(i, environment), func() (bool, string) {
		var k v1alpha1.ApiKey
		if err := c.k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: keyName(i, environment)}, &k); err != nil {
			return false, err.Error()
		}
		if ok, detail := testkube.ReadyNow(k.Status.Conditions, k.Generation); !ok {
			return false, detail
		}
		var s corev1.Secret
		if err := c.k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: k.Spec.SecretName}, &s); err != nil {
			return false, err.Error()
		}
		key = string(s.Data["apiKey"])
		return key != "" && key != notEqual, "secret holds the previous key"
	})
	return key, err
}

// waitWallet waits until the Wallet is Ready with at least applied top-ups.
func (c *cluster) waitWallet(ctx context.Context, name string, applied int32) error {
	return poll.Wait(ctx, pollPause, 60*time.Second, "wallet "+name, func() (bool, string) {
		var w v1alpha1.Wallet
		if err := c.k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &w); err != nil {
			return false, err.Error()
		}
		if ok, detail := testkube.ReadyNow(w.Status.Conditions, w.Generation); !ok {
			return false, detail
		}
		return w.Status.AppliedTopUps >= applied, fmt.Sprintf("%d top-ups applied", w.Status.AppliedTopUps)
	})
}

// importStock loads n generated codes of product with `codeport codes import`.
func (c *cluster) importStock(ctx context.Context, product string, n int) (string, error) {
	file := filepath.Join(c.dir, "stock-"+product+".txt")
	var b strings.Builder
	for u := range n {
		fmt.Fprintf(&b, "SOAK-%s-%08d-%s\n", product, u, uuid.NewString()[:8])
	}
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		return "", fmt.Errorf("write stock file: %w", err)
	}
	cmd := exec.CommandContext(ctx, c.binary, "codes", "import",
		"--product", product, "--database-url", c.dbURL, "--codes-key", codesKey, file)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("codes import %s: %w\n%s", product, err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// update applies mutate to the current version of obj, retrying on conflicts with the
// operators' own writes.
func (c *cluster) update(ctx context.Context, obj client.Object, mutate func()) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		mutate()
		return c.k8s.Update(ctx, obj)
	})
	if err != nil {
		return fmt.Errorf("update %T %s: %w", obj, obj.GetName(), err)
	}
	return nil
}

// topUpRound adds a top-up of 50.00 EUR to every Wallet.
func (c *cluster) topUpRound(ctx context.Context, round int) error {
	var wg sync.WaitGroup
	errs := make(chan error, 2*partnersCount)
	for i := range partnersCount {
		for _, env := range environments {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w := &v1alpha1.Wallet{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: keyName(i, env)}}
				errs <- c.update(ctx, w, func() {
					w.Spec.TopUps = append(w.Spec.TopUps, v1alpha1.TopUp{
						ID:       fmt.Sprintf("round-%d", round),
						Currency: "EUR",
						Amount:   "50.00",
						Note:     "soak top-up",
					})
				})
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
