package store_test

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/codeport/codeport/internal/store"
	"github.com/codeport/codeport/internal/store/storetest"
)

func TestPlanPositions(t *testing.T) {
	const gap = 1024
	for _, tc := range []struct {
		name   string
		codes  []string
		stored map[string]int
		want   []int
	}{
		{"fresh", []string{"a", "b", "c"}, nil, []int{0, gap, 2 * gap}},
		{"unchanged", []string{"a", "b"}, map[string]int{"a": 5, "b": 9}, []int{5, 9}},
		{"insert between", []string{"a", "x", "b"}, map[string]int{"a": 0, "b": 1024}, []int{0, 512, 1024}},
		{"two between", []string{"a", "x", "y", "b"}, map[string]int{"a": 0, "b": 300}, []int{0, 100, 200, 300}},
		{"insert first", []string{"x", "a"}, map[string]int{"a": 0}, []int{-gap, 0}},
		{"insert last", []string{"a", "x", "y"}, map[string]int{"a": 7}, []int{7, 7 + gap, 7 + 2*gap}},
		{"move last to first", []string{"c", "a", "b"}, map[string]int{"a": 0, "b": 10, "c": 20}, []int{-gap, 0, 10}},
		{"swap", []string{"b", "a", "c"}, map[string]int{"a": 0, "b": 10, "c": 20}, []int{-gap, 0, 20}},
		{"no room: laid out afresh", []string{"a", "x", "b"}, map[string]int{"a": 0, "b": 1}, []int{0, gap, 2 * gap}},
		{"removed ones do not count", []string{"a", "c"}, map[string]int{"a": 0, "b": 1, "c": 2}, []int{0, 2}},
		{"reversed keeps one", []string{"c", "b", "a"}, map[string]int{"a": 0, "b": 10, "c": 20},
			[]int{-2 * gap, -gap, 0}},
		{"near the top: laid out afresh", []string{"a", "x"}, map[string]int{"a": math.MaxInt32 - 10}, []int{0, gap}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := store.PlanPositions(tc.codes, tc.stored)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

const largeCatalog = 20_000

func productRow(i int, price int64) store.CatalogProduct {
	return store.CatalogProduct{
		ProductCode: fmt.Sprintf("1%013d", i), Name: fmt.Sprintf("Product %d", i), Brand: "Acme",
		CountryCode: "DE", CurrencyCode: "EUR", BuyingCurrencyCode: "EUR", DenominationType: "fixed",
		Price: &price, BuyingPrice: &price, DiscountPercentage: "7.5", Type: "digital", Status: "active",
		Tags: []string{"gaming"}, Languages: store.JSONSlice[store.ProductLanguage]{{LanguageCode: "en",
			Name: "English", Description: "A product"}},
	}
}

func catalogRows(n int) []store.CatalogProduct {
	out := make([]store.CatalogProduct, n)
	for i := range out {
		out[i] = productRow(i, 1000)
	}
	return out
}

// writes applies products to the catalog in one transaction, counts the catalog_products rows
// that transaction inserted, updated and deleted, and keeps the change only when commit is set.
func writes(t *testing.T, db *store.DB, products []store.CatalogProduct, commit bool) (store.CatalogChange, [3]int64) {
	t.Helper()
	ctx := context.Background()
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	before := pendingWrites(t, tx)
	c := store.Catalog{Namespace: "ns", Name: "eu", ValidFrom: time.Unix(0, 0).UTC(), CatalogTypeID: 1,
		DefaultDiscountPercentage: "5"}
	change, err := store.UpsertCatalog(ctx, tx, &c, products)
	if err != nil {
		t.Fatal(err)
	}
	n := pendingWrites(t, tx)
	for i := range n {
		n[i] -= before[i]
	}
	if commit {
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return change, n
}

// pendingWrites reads the rows of catalog_products inserted, updated and deleted by this
// connection's transactions whose statistics are not yet reported to pg_stat_user_tables (the
// current one among them): the difference over a statement is what it wrote.
func pendingWrites(t *testing.T, tx pgx.Tx) [3]int64 {
	t.Helper()
	var n [3]int64
	err := tx.QueryRow(context.Background(), `SELECT n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_xact_user_tables
		WHERE relname = 'catalog_products'`).Scan(&n[0], &n[1], &n[2])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func listOrder(t *testing.T, db *store.DB, id any) []string {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(),
		`SELECT product_code FROM catalog_products WHERE catalog_id = $1 ORDER BY position, product_code`, id)
	if err != nil {
		t.Fatal(err)
	}
	codes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return codes
}

func codesOf(products []store.CatalogProduct) []string {
	out := make([]string, len(products))
	for i := range products {
		out[i] = products[i].ProductCode
	}
	return out
}

// TestUpsertCatalogWritesWhatChanged: on a large catalog, each change writes only its own rows
// (counted by PostgreSQL for the transaction), reports them with their old and new content, and
// leaves the catalog in the new list order.
func TestUpsertCatalogWritesWhatChanged(t *testing.T) {
	db := storetest.Open(t, store.Options{MaxConns: 4})
	base := catalogRows(largeCatalog)
	if change, n := writes(t, db, base, true); len(change.Added) != largeCatalog || n != [3]int64{largeCatalog, 0, 0} {
		t.Fatalf("first load: %d added, rows %v", len(change.Added), n)
	}
	mid := largeCatalog / 2
	for _, tc := range []struct {
		name   string
		change func([]store.CatalogProduct) []store.CatalogProduct
		rows   [3]int64 // inserted, updated, deleted
		check  func(*testing.T, store.CatalogChange)
	}{
		{"unchanged", func(p []store.CatalogProduct) []store.CatalogProduct { return p }, [3]int64{}, nil},
		{"one price", func(p []store.CatalogProduct) []store.CatalogProduct {
			p[mid] = productRow(mid, 1234)
			return p
		}, [3]int64{0, 1, 0}, func(t *testing.T, c store.CatalogChange) {
			t.Helper()
			if len(c.Updated) != 1 || *c.Updated[0].Old.Price != 1000 || *c.Updated[0].New.Price != 1234 ||
				c.Updated[0].Old.ProductCode != base[mid].ProductCode {
				t.Fatalf("updated: %+v", c.Updated)
			}
		}},
		{"insert in the middle", func(p []store.CatalogProduct) []store.CatalogProduct {
			return slices.Insert(p, mid, productRow(largeCatalog, 500))
		}, [3]int64{1, 0, 0}, func(t *testing.T, c store.CatalogChange) {
			t.Helper()
			if len(c.Added) != 1 || c.Added[0].ProductCode != productRow(largeCatalog, 0).ProductCode {
				t.Fatalf("added: %+v", c.Added)
			}
		}},
		{"insert first and last", func(p []store.CatalogProduct) []store.CatalogProduct {
			return append(slices.Insert(p, 0, productRow(largeCatalog, 1)), productRow(largeCatalog+1, 1))
		}, [3]int64{2, 0, 0}, nil},
		{"delete one", func(p []store.CatalogProduct) []store.CatalogProduct {
			return slices.Delete(p, mid, mid+1)
		}, [3]int64{0, 0, 1}, func(t *testing.T, c store.CatalogChange) {
			t.Helper()
			if len(c.Removed) != 1 || c.Removed[0].ProductCode != base[mid].ProductCode || c.Removed[0].Name == "" {
				t.Fatalf("removed: %+v", c.Removed)
			}
		}},
		{"move the last first", func(p []store.CatalogProduct) []store.CatalogProduct {
			last := p[len(p)-1]
			return slices.Insert(p[:len(p)-1], 0, last)
		}, [3]int64{0, 1, 0}, func(t *testing.T, c store.CatalogChange) {
			t.Helper()
			if c.Moved != 1 || len(c.Updated) != 0 {
				t.Fatalf("moved %d, updated %d", c.Moved, len(c.Updated))
			}
		}},
		{"swap neighbours", func(p []store.CatalogProduct) []store.CatalogProduct {
			p[mid], p[mid+1] = p[mid+1], p[mid]
			return p
		}, [3]int64{0, 1, 0}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.change(catalogRows(largeCatalog))
			change, n := writes(t, db, slices.Clone(want), false)
			if n != tc.rows || int64(change.RowsWritten()) != n[0]+n[1]+n[2] {
				t.Fatalf("rows inserted, updated, deleted: %v (change reports %d), want %v", n, change.RowsWritten(), tc.rows)
			}
			if tc.check != nil {
				tc.check(t, change)
			}
		})
	}

	t.Run("list order follows every change", func(t *testing.T) {
		want := catalogRows(largeCatalog)
		for i := range 12 { // more insertions at one place than the gap holds
			want = slices.Insert(want, 3, productRow(largeCatalog+i, 1))
			want[len(want)-1], want[5] = want[5], want[len(want)-1]
			change, _ := writes(t, db, slices.Clone(want), true)
			if got := listOrder(t, db, change.ID); !slices.Equal(got, codesOf(want)) {
				t.Fatalf("after change %d the list is out of order", i)
			}
		}
	})
}

// TestProductDigestCoversEveryColumn changes each field of a product, nested ones included, and
// expects a different digest, except for the key, the position and the timestamps: a field the
// digest forgot would make its changes invisible to UpsertCatalog.
func TestProductDigestCoversEveryColumn(t *testing.T) {
	base := productRow(1, 1000)
	base.Promotion = ptrTo(store.NewJSONObject(store.ProductPromotion{}))
	base.ServiceFee = ptrTo(store.NewJSONObject(store.ProductServiceFee{}))
	ignored := map[string]bool{"CatalogID": true, "ProductCode": true, "Position": true, "CreatedAt": true,
		"UpdatedAt": true}
	want := store.ProductDigest(&base)
	differs := func(t *testing.T, field string, p *store.CatalogProduct) {
		t.Helper()
		if slices.Equal(store.ProductDigest(p), want) {
			t.Errorf("a change of %s leaves the digest as it was", field)
		}
	}
	typ := reflect.TypeOf(base)
	for i := range typ.NumField() {
		f := typ.Field(i)
		if ignored[f.Name] {
			continue
		}
		p := base
		p.Languages = slices.Clone(base.Languages)
		v := reflect.ValueOf(&p).Elem().Field(i)
		switch f.Name {
		case "Languages":
			eachFieldChanged(base.Languages[0], func(name string, l store.ProductLanguage) {
				p.Languages = []store.ProductLanguage{l}
				differs(t, "Languages."+name, &p)
			})
			p.Languages = append(slices.Clone(base.Languages), store.ProductLanguage{})
		case "Promotion":
			eachFieldChanged(base.Promotion.Data(), func(name string, promo store.ProductPromotion) {
				p.Promotion = ptrTo(store.NewJSONObject(promo))
				differs(t, "Promotion."+name, &p)
			})
			p.Promotion = nil
		case "ServiceFee":
			eachFieldChanged(base.ServiceFee.Data(), func(name string, fee store.ProductServiceFee) {
				p.ServiceFee = ptrTo(store.NewJSONObject(fee))
				differs(t, "ServiceFee."+name, &p)
			})
			p.ServiceFee = nil
		case "FirstSale", "PlayableOn":
			v.Set(reflect.ValueOf(pgtype.Date{Time: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC), Valid: true}))
		default:
			switch v.Kind() {
			case reflect.String:
				v.SetString(v.String() + "-changed")
			case reflect.Bool:
				v.SetBool(!v.Bool())
			case reflect.Pointer:
				if v.IsNil() {
					v.Set(reflect.ValueOf(ptrTo(int64(3))))
				} else {
					v.Set(reflect.Zero(v.Type()))
				}
			case reflect.Slice:
				v.Set(reflect.Append(v, reflect.ValueOf("changed")))
			default:
				t.Fatalf("field %s of kind %s: teach this test to change it", f.Name, v.Kind())
			}
		}
		differs(t, f.Name, &p)
	}
}

func ptrTo[T any](v T) *T { return &v }

// eachFieldChanged calls fn with a copy of base for each of its (string) fields, that field
// changed.
func eachFieldChanged[T any](base T, fn func(field string, changed T)) {
	typ := reflect.TypeFor[T]()
	for j := range typ.NumField() {
		v := base
		f := reflect.ValueOf(&v).Elem().Field(j)
		f.SetString(f.String() + "-changed")
		fn(typ.Field(j).Name, v)
	}
}
