package main

// The catalog-scale figures (C1-C4, -figures catalog-scale, not in the default set: it starts
// envtest's kube-apiserver) measure a distributor's catalog applied through the cluster: the
// operator (a process of its own, against envtest's kube-apiserver) and two `codeport serve`
// replicas of production, all on one database.
//
//   - C1: the size of a shard of MaxShardProducts realistic products as etcd stores it after a
//     server-side apply (managedFields included), and as client-side `kubectl apply` would
//     write its last-applied-configuration annotation (which must stay under 256 KiB).
//   - C2: cold load: every shard applied server-side at once, to the Catalog Ready with every
//     product, and to every product served by both replicas.
//   - C3: the catalog list (unfiltered and with three filters) on a replica, against the B1
//     bare-handler baseline serving the same bytes.
//   - C4: one price changed in one shard: from the apply to the new price on
//     GET /catalog/products/{code} of every replica, and the catalog_products rows written.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/codeport/codeport/api/v1alpha1"
	"github.com/codeport/codeport/internal/tenancy"
	"github.com/codeport/codeport/internal/test/poll"
	"github.com/codeport/codeport/internal/test/testfixture"
)

// annotationLimit is the API server's limit on the total size of an object's annotations,
// which client-side apply's last-applied-configuration must fit in.
const annotationLimit = 256 * 1024

const bigCatalog = "distributor"

func catalogScaleFigures(ctx context.Context, cfg config, binary string) ([]row, error) {
	dir, err := os.MkdirTemp("", "codeport-bench-catalog-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	c, err := startCluster(ctx, filepath.Join(dir, "cluster"))
	if err != nil {
		return nil, err
	}
	defer c.stop()
	n := cfg.catalogProducts
	shards := catalogShards(n)

	if err := c.createBigCatalogTenant(ctx); err != nil {
		return nil, err
	}
	op, err := c.startOperator(binary, "catalog-scale")
	if err != nil {
		return nil, err
	}
	defer op.stop()
	var replicas []*server
	defer func() {
		for _, s := range replicas {
			s.stop()
		}
	}()
	for range 2 {
		s, err := startServe(binary, c.database.URL, string(tenancy.Production))
		if err != nil {
			return nil, err
		}
		replicas = append(replicas, s)
	}
	var keys []string
	for i := range catalogKeys {
		key, err := c.waitKey(ctx, fmt.Sprintf("%s-production-%d-key", bigCatalog, i))
		if err != nil {
			return nil, err
		}
		keys = append(keys, key)
	}
	key := keys[0]

	progress("C2 applying %d products in %d shards", n, len(shards))
	started := time.Now()
	if err := c.applyAll(ctx, shards); err != nil {
		return nil, err
	}
	applied := time.Since(started)
	if err := poll.Wait(ctx, pollPause, 10*time.Minute, "catalog Ready with every product", func() (bool, string) {
		return c.catalogReady(ctx, n, len(shards))
	}); err != nil {
		return nil, err
	}
	ready := time.Since(started)
	if err := poll.Wait(ctx, pollPause, 5*time.Minute, "every product served", func() (bool, string) {
		return allServe(replicas, key, "/catalog/products?take=1", func(body map[string]any) bool {
			return body["count"] == float64(n)
		})
	}); err != nil {
		return nil, err
	}
	served := time.Since(started)
	progress("C2 applied in %s, Ready in %s, served by both replicas in %s",
		applied.Round(time.Millisecond), ready.Round(time.Millisecond), served.Round(time.Millisecond))

	stored, annotation, err := c.shardSizes(ctx, &shards[0])
	if err != nil {
		return nil, err
	}
	perProduct := float64(annotation) / float64(len(shards[0].Spec.Products))
	fitsAnnotation := float64(annotationLimit) / perProduct

	lists, err := catalogListFigures(cfg, replicas[0], keys)
	if err != nil {
		return nil, err
	}

	progress("C4 changing one price")
	change, err := c.onePriceChange(ctx, replicas, key, &shards[len(shards)/2])
	if err != nil {
		return nil, err
	}
	set := fmt.Sprintf("%d realistic products in %d shards", n, len(shards))
	return append([]row{
		{fmt.Sprintf("C1 shard of %d realistic products as stored after server-side apply (KiB)",
			len(shards[0].Spec.Products)), float64(stored) / 1024, 1536, "< 1536 KiB (etcd)", stored < 1536*1024},
		{"C1 client-side apply annotation per realistic product (bytes)", perProduct, 0, "", true},
		{"C1 realistic products per shard that fit client-side apply's 256 KiB annotation", fitsAnnotation, 0, "", true},
		{"C2 cold load, " + set + ": all applied server-side (s)", applied.Seconds(), 0, "", true},
		{"C2 cold load, " + set + ": Catalog Ready with every product (s)", ready.Seconds(), 0, "", true},
		{"C2 cold load, " + set + ": every product served by both replicas (s)", served.Seconds(), 0, "", true},
	}, append(lists,
		row{"C4 one price changed in one shard: the server-side apply returned (s)", change.applied.Seconds(), 0, "", true},
		row{"C4 one price changed in one shard: the operator's transaction began (s)", change.written.Seconds(), 0, "",
			true},
		row{"C4 one price changed in one shard: new price on every replica (s)", change.served.Seconds(), 0, "< 2 s",
			change.served < 2*time.Second},
		row{"C4 one price changed in one shard: catalog_products rows written", float64(change.rows), 0, "1",
			change.rows == 1},
	)...), nil
}

// catalogShards splits n realistic products into shards of MaxShardProducts naming bigCatalog.
func catalogShards(n int) []v1alpha1.CatalogShard {
	var shards []v1alpha1.CatalogShard
	for from := 0; from < n; from += v1alpha1.MaxShardProducts {
		var products []v1alpha1.CatalogProduct
		for i := from; i < min(n, from+v1alpha1.MaxShardProducts); i++ {
			products = append(products, realisticProduct(i))
		}
		s := testfixture.CatalogShard(fmt.Sprintf("%s-%04d", bigCatalog, from/v1alpha1.MaxShardProducts), bigCatalog,
			products, testfixture.InNamespace(tenantNamespace))
		s.TypeMeta = metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "CatalogShard"}
		shards = append(shards, *s)
	}
	return shards
}

// catalogKeys is how many production keys the partner has: the rate limit is per key, and the
// list figures rotate over them so that none reaches the CRD's highest limit.
const catalogKeys = 8

// createBigCatalogTenant creates the Catalog (its products come from shards), a partner bound
// to it and the partner's production ApiKeys.
func (c *cluster) createBigCatalogTenant(ctx context.Context) error {
	ns := testfixture.InNamespace(c.namespace)
	objs := []client.Object{
		testfixture.Catalog(bigCatalog, ns, testfixture.WithDiscount("5")),
		testfixture.Partner(bigCatalog, ns, testfixture.WithContact("Distributor", "ops@distributor.example"),
			testfixture.WithCatalogRef(bigCatalog), testfixture.WithAllowlist("127.0.0.1/32"),
			testfixture.WithRateLimit(1_000_000)),
	}
	for i := range catalogKeys {
		objs = append(objs, testfixture.APIKey(bigCatalog, "production", ns,
			testfixture.Named(fmt.Sprintf("%s-production-%d", bigCatalog, i))))
	}
	for _, o := range objs {
		if err := c.k8s.Create(ctx, o); err != nil {
			return fmt.Errorf("create %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

// waitKey waits for the operator to write the key Secret and returns its key.
func (c *cluster) waitKey(ctx context.Context, secret string) (string, error) {
	var key string
	err := poll.Wait(ctx, pollPause, 2*time.Minute, "key Secret "+secret, func() (bool, string) {
		var s corev1.Secret
		if err := c.k8s.Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: secret}, &s); err != nil {
			return false, err.Error()
		}
		key = string(s.Data["apiKey"])
		return key != "", "no key yet"
	})
	return key, err
}

// applyAll applies the shards server-side, as `kubectl apply --server-side` does, 8 at once.
func (c *cluster) applyAll(ctx context.Context, shards []v1alpha1.CatalogShard) error {
	work := make(chan *v1alpha1.CatalogShard)
	errs := make(chan error, len(shards))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for s := range work {
				errs <- c.apply(ctx, s)
			}
		})
	}
	for i := range shards {
		work <- &shards[i]
	}
	close(work)
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

func (c *cluster) apply(ctx context.Context, s *v1alpha1.CatalogShard) error {
	u, err := manifest(s)
	if err != nil {
		return err
	}
	err = c.k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("bench"), client.ForceOwnership)
	if err != nil {
		return fmt.Errorf("apply shard %s: %w", s.Name, err)
	}
	return nil
}

// manifest is the shard as a file would hold it: no status, no server-set metadata.
func manifest(s *v1alpha1.CatalogShard) (*unstructured.Unstructured, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(s)
	if err != nil {
		return nil, fmt.Errorf("shard %s: %w", s.Name, err)
	}
	delete(obj, "status")
	unstructured.RemoveNestedField(obj, "metadata", "creationTimestamp")
	return &unstructured.Unstructured{Object: obj}, nil
}

func (c *cluster) catalogReady(ctx context.Context, products, shards int) (bool, string) {
	var cat v1alpha1.Catalog
	if err := c.k8s.Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: bigCatalog}, &cat); err != nil {
		return false, err.Error()
	}
	ok, state := readyNow(cat.Status.Conditions, cat.Generation)
	return ok && int(cat.Status.ProductCount) == products && int(cat.Status.ShardCount) == shards,
		fmt.Sprintf("%d products, %d shards, %s", cat.Status.ProductCount, cat.Status.ShardCount, state)
}

// readyNow reports whether the Ready condition is True for generation, and says what it is.
func readyNow(conditions []metav1.Condition, generation int64) (bool, string) {
	for _, cond := range conditions {
		if cond.Type == v1alpha1.ConditionReady {
			return cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == generation,
				fmt.Sprintf("Ready %s %s: %s", cond.Status, cond.Reason, cond.Message)
		}
	}
	return false, "no Ready condition"
}

// allServe reports whether path answers, on every replica, a body that ok accepts.
func allServe(replicas []*server, key, path string, ok func(map[string]any) bool) (bool, string) {
	for i, r := range replicas {
		raw, err := fetch(r.base+path, key)
		if err != nil {
			return false, fmt.Sprintf("replica %d: %v", i, err)
		}
		var body map[string]any
		if err := json.Unmarshal(raw, &body); err != nil || !ok(body) {
			return false, fmt.Sprintf("replica %d: %.200s", i, raw)
		}
	}
	return true, ""
}

// shardSizes returns the size of the shard's JSON as the API server stores it (managedFields
// included) and of the last-applied-configuration annotation client-side apply would write for
// it (the manifest's JSON).
func (c *cluster) shardSizes(ctx context.Context, s *v1alpha1.CatalogShard) (stored, annotation int, err error) {
	var got v1alpha1.CatalogShard
	if err := c.k8s.Get(ctx, client.ObjectKeyFromObject(s), &got); err != nil {
		return 0, 0, fmt.Errorf("read shard %s: %w", s.Name, err)
	}
	got.APIVersion, got.Kind = s.APIVersion, s.Kind
	raw, err := json.Marshal(&got)
	if err != nil {
		return 0, 0, err
	}
	u, err := manifest(s)
	if err != nil {
		return 0, 0, err
	}
	applied, err := json.Marshal(u.Object)
	if err != nil {
		return 0, 0, err
	}
	return len(raw), len(applied), nil
}

// catalogListFigures measures the catalog list on a replica against the B1 bare handler serving
// the same bytes: throughput, and p99 at the baseline's 50% load.
func catalogListFigures(cfg config, replica *server, keys []string) ([]row, error) {
	paths := map[string]string{
		"/list":     "/catalog/products?take=20",
		"/filtered": "/catalog/products?take=20&country=de&brand=brand-3,brand-7&tag=gaming",
	}
	bodies := map[string][]byte{}
	for name, path := range paths {
		body, err := fetch(replica.base+path, keys[0])
		if err != nil {
			return nil, err
		}
		bodies[name] = body
	}
	baseline, stop, err := startBaseline(bodies, "")
	if err != nil {
		return nil, err
	}
	defer stop()
	var rows []row
	for _, name := range []string{"/list", "/filtered"} {
		figure := "C3 GET " + paths[name]
		progress("%s", figure)
		ours, base := measure(replica.base+paths[name], keys, cfg.duration), measure(baseline+name, keys, cfg.duration)
		sameRate := measureAt(replica.base+paths[name], keys, base.max/2, cfg.duration)
		rows = append(rows,
			row{figure + ": req/s", ours.max, base.max, ">= 0.5x", ours.max >= 0.5*base.max},
			row{figure + ": p99 at the baseline's 50% load (ms)", sameRate.p99, base.p99, "<= 1.5x",
				sameRate.p99 <= latencyRatio*base.p99})
	}
	return rows, nil
}

// priceChange is what C4 measured, the times from the start of the apply.
type priceChange struct {
	// applied: the apply returned; written: the operator's transaction writing the new price
	// began (the row's updated_at); served: every replica answered the new price.
	applied, written, served time.Duration
	// rows is the number of catalog_products rows the change wrote.
	rows int64
}

// onePriceChange raises the price of one product of shard by one cent, applies the shard and
// waits for every replica to serve the new price.
func (c *cluster) onePriceChange(
	ctx context.Context, replicas []*server, key string, shard *v1alpha1.CatalogShard,
) (priceChange, error) {
	var change priceChange
	db, err := pgx.Connect(ctx, c.database.URL)
	if err != nil {
		return change, err
	}
	defer db.Close(ctx)
	var xid int64
	if err := db.QueryRow(ctx, `SELECT (pg_current_xact_id()::text::bigint) % 4294967296`).Scan(&xid); err != nil {
		return change, fmt.Errorf("current transaction id: %w", err)
	}
	p := &shard.Spec.Products[len(shard.Spec.Products)/2]
	price := *p.Price + 1
	p.Price = &price
	started := time.Now()
	if err := c.apply(ctx, shard); err != nil {
		return change, err
	}
	change.applied = time.Since(started)
	err = poll.Wait(ctx, pollPause, time.Minute, "new price on every replica", func() (bool, string) {
		return allServe(replicas, key, "/catalog/products/"+p.ProductCode, func(body map[string]any) bool {
			return body["price"] == float64(price)
		})
	})
	if err != nil {
		return change, err
	}
	change.served = time.Since(started)
	var updated *time.Time
	err = db.QueryRow(ctx, `SELECT count(*), max(updated_at) FROM catalog_products WHERE xmin::text::bigint > $1`,
		xid).Scan(&change.rows, &updated)
	if err != nil {
		return change, fmt.Errorf("count written rows: %w", err)
	}
	if updated != nil {
		change.written = updated.Sub(started)
	}
	return change, nil
}
