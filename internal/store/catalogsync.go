package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// BulkQuerier is a Querier that can also COPY rows in and pipeline statements: pgx.Tx,
// *pgx.Conn and *pgxpool.Pool are.
type BulkQuerier interface {
	Querier
	CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, rows pgx.CopyFromSource) (int64, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// CatalogChange is what UpsertCatalog wrote.
type CatalogChange struct {
	ID uuid.UUID
	// CatalogChanged is true when the catalog row itself (description, validity, discount) was
	// written.
	CatalogChanged bool
	// Added are the new products, Removed the old rows of the deleted ones, and Updated the
	// products whose content changed, with their rows before and after.
	Added   []CatalogProduct
	Updated []ProductUpdate
	Removed []CatalogProduct
	// Moved counts rows rewritten only to keep the list order (their position), content unchanged.
	Moved int
	// Backfilled lists the productCodes of rows stored without a digest (written by a version
	// that did not keep one): they are rewritten once, and whether their content changed is not
	// known.
	Backfilled []string
}

// ProductUpdate is a product whose content changed.
type ProductUpdate struct{ Old, New CatalogProduct }

// RowsWritten is the number of catalog_products rows the change inserted, updated or deleted.
func (c *CatalogChange) RowsWritten() int {
	return len(c.Added) + len(c.Updated) + len(c.Removed) + c.Moved + len(c.Backfilled)
}

// UpsertCatalog creates or updates the catalog (namespace, name) and brings its products to
// products (in list order), in q (a transaction), returning what it wrote. Only what differs is
// written: an unchanged catalog writes no row, a changed price one. The diff reads each stored
// product's (product_code, digest, position), never the whole rows, so its cost follows the
// size of the change rather than of the catalog.
func UpsertCatalog(ctx context.Context, q BulkQuerier, c *Catalog, products []CatalogProduct) (CatalogChange, error) {
	var change CatalogChange
	err := q.QueryRow(ctx, `SELECT id FROM catalogs WHERE namespace = $1 AND name = $2
		AND (description, valid_from, valid_to, catalog_type_id, default_discount_percentage, stock_low_threshold,
		    deleted_at)
		    IS NOT DISTINCT FROM ($3::text, $4::timestamptz, $5::timestamptz, $6::integer, $7::text::numeric,
		    $8::integer, NULL::timestamptz)`,
		c.Namespace, c.Name, c.Description, c.ValidFrom, c.ValidTo, c.CatalogTypeID, c.DefaultDiscountPercentage,
		c.StockLowThreshold,
	).Scan(&c.ID)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		if err := upsertCatalogRow(ctx, q, c); err != nil {
			return change, err
		}
		change.CatalogChanged = true
	case err != nil:
		return change, fmt.Errorf("read catalog %s/%s: %w", c.Namespace, c.Name, err)
	}
	change.ID = c.ID
	if err := syncProducts(ctx, q, c.ID, products, &change); err != nil {
		return change, fmt.Errorf("products of %s/%s: %w", c.Namespace, c.Name, err)
	}
	return change, nil
}

func upsertCatalogRow(ctx context.Context, q Querier, c *Catalog) error {
	err := q.QueryRow(ctx, `WITH up AS (
		INSERT INTO catalogs (namespace, name, description, valid_from, valid_to, catalog_type_id,
			default_discount_percentage, stock_low_threshold)
		VALUES ($1, $2, $3, $4, $5, $6, $7::text::numeric, $8)
		ON CONFLICT (namespace, name) DO UPDATE SET description = EXCLUDED.description, valid_from = EXCLUDED.valid_from,
			valid_to = EXCLUDED.valid_to, catalog_type_id = EXCLUDED.catalog_type_id,
			default_discount_percentage = EXCLUDED.default_discount_percentage,
			stock_low_threshold = EXCLUDED.stock_low_threshold, updated_at = now(), deleted_at = NULL
		RETURNING id)
		SELECT id FROM up`,
		c.Namespace, c.Name, c.Description, c.ValidFrom, c.ValidTo, c.CatalogTypeID, c.DefaultDiscountPercentage,
		c.StockLowThreshold,
	).Scan(&c.ID)
	if err != nil {
		return fmt.Errorf("upsert catalog %s/%s: %w", c.Namespace, c.Name, err)
	}
	return nil
}

// storedProduct is what the diff reads of a stored product.
type storedProduct struct {
	digest   []byte
	position int
}

// productWriteColumns are the columns of catalog_products that provisioning writes, after
// catalog_id and product_code; productValues gives their values in this order.
var productWriteColumns = []string{"position", "ean", "name", "short_name", "image", "brand", "publisher",
	"country_code", "currency_code", "buying_currency_code", "denomination_type", "price", "buying_price", "rrp",
	"denomination_min", "denomination_max", "denomination_step", "denomination_default", "discount_percentage",
	"main_category", "sub_category", "product_category", "product_type", "platform", "type", "tags", "languages",
	"promotion", "service_fee", "status", "preorder", "first_sale", "playable_on", "expires", "expiry_policy",
	"digest"}

// syncProducts makes a catalog's products equal to products: it reads the stored digests and
// positions, then deletes the removed products, updates those whose digest or position
// differs and copies in the new ones.
func syncProducts(ctx context.Context, q BulkQuerier, catalogID uuid.UUID, products []CatalogProduct,
	change *CatalogChange,
) error {
	stored, err := storedProducts(ctx, q, catalogID)
	if err != nil {
		return err
	}
	plan := diffProducts(catalogID, products, stored, change)
	olds, err := productsByCode(ctx, q, catalogID, append(slices.Clone(plan.removed), plan.changed...))
	if err != nil {
		return err
	}
	for _, code := range plan.changed {
		change.Updated = append(change.Updated, ProductUpdate{Old: olds[code], New: *plan.rows[code]})
	}
	for _, code := range plan.removed {
		change.Removed = append(change.Removed, olds[code])
	}
	if len(plan.removed) > 0 {
		if _, err := q.Exec(ctx, `DELETE FROM catalog_products WHERE catalog_id = $1 AND product_code = ANY($2::text[])`,
			pgUUID(catalogID), plan.removed); err != nil {
			return fmt.Errorf("delete products: %w", err)
		}
	}
	if len(plan.updates) > 0 {
		rows, err := valueRows(catalogID, plan.updates)
		if err != nil {
			return err
		}
		if err := updateProducts(ctx, q, rows); err != nil {
			return err
		}
	}
	if len(plan.inserts) > 0 {
		rows, err := valueRows(catalogID, plan.inserts)
		if err != nil {
			return err
		}
		if _, err := q.CopyFrom(ctx, pgx.Identifier{"catalog_products"}, writeColumns(), pgx.CopyFromRows(rows)); err != nil {
			return fmt.Errorf("insert products: %w", err)
		}
	}
	return nil
}

// productWrite is a row to write and its digest.
type productWrite struct {
	row    *CatalogProduct
	digest []byte
}

// productPlan is what syncProducts writes.
type productPlan struct {
	inserts, updates []productWrite
	// removed and changed are the productCodes deleted and those whose content changed, in
	// order; rows holds the desired row of each product.
	removed, changed []string
	rows             map[string]*CatalogProduct
}

// diffProducts compares the desired products with the stored digests and positions: it sets
// each product's catalog and position, records added, moved and backfilled products in change,
// and returns the rows to write.
func diffProducts(catalogID uuid.UUID, products []CatalogProduct, stored map[string]storedProduct,
	change *CatalogChange,
) productPlan {
	plan := productPlan{rows: make(map[string]*CatalogProduct, len(products))}
	codes := make([]string, len(products))
	for i := range products {
		codes[i] = products[i].ProductCode
		plan.rows[codes[i]] = &products[i]
	}
	positions := planPositions(codes, stored)
	var digests digester
	for i := range products {
		p := &products[i]
		p.CatalogID, p.Position = catalogID, positions[i]
		w := productWrite{p, digests.sum(p)}
		old, ok := stored[p.ProductCode]
		switch {
		case !ok:
			plan.inserts = append(plan.inserts, w)
			change.Added = append(change.Added, *p)
		case old.digest == nil:
			plan.updates = append(plan.updates, w)
			change.Backfilled = append(change.Backfilled, p.ProductCode)
		case !bytes.Equal(old.digest, w.digest):
			plan.updates = append(plan.updates, w)
			plan.changed = append(plan.changed, p.ProductCode)
		case old.position != p.Position:
			plan.updates = append(plan.updates, w)
			change.Moved++
		}
	}
	for code := range stored {
		if plan.rows[code] == nil {
			plan.removed = append(plan.removed, code)
		}
	}
	sort.Strings(plan.removed)
	return plan
}

// writeColumns are the columns valueRows gives values for.
func writeColumns() []string {
	return append([]string{"catalog_id", "product_code"}, productWriteColumns...)
}

// valueRows are the values of writeColumns for each write.
func valueRows(catalogID uuid.UUID, writes []productWrite) ([][]any, error) {
	rows := make([][]any, len(writes))
	for i, w := range writes {
		values, err := productValues(w.row, w.digest)
		if err != nil {
			return nil, err
		}
		rows[i] = append([]any{pgUUID(catalogID), w.row.ProductCode}, values...)
	}
	return rows, nil
}

// bulkUpdate is the number of changed rows from which updateProducts stages them with COPY and
// updates them in one statement rather than pipelining one UPDATE per row: a few rows (an edit)
// are cheaper without the staging table, many (a discount change, a catalog's first reconcile
// after digests were introduced) much cheaper with it.
const bulkUpdate = 500

// updateProducts rewrites the product rows given as values of writeColumns.
func updateProducts(ctx context.Context, q BulkQuerier, rows [][]any) error {
	if len(rows) < bulkUpdate {
		set := make([]string, len(productWriteColumns))
		for i, col := range productWriteColumns {
			set[i] = col + " = $" + strconv.Itoa(i+3)
		}
		update := `UPDATE catalog_products SET ` + strings.Join(set, ", ") + `, updated_at = now()
			WHERE catalog_id = $1 AND product_code = $2`
		batch := &pgx.Batch{}
		for _, r := range rows {
			batch.Queue(update, r...)
		}
		if err := q.SendBatch(ctx, batch).Close(); err != nil {
			return fmt.Errorf("update products: %w", err)
		}
		return nil
	}
	_, err := q.Exec(ctx, `CREATE TEMP TABLE changed_products (LIKE catalog_products INCLUDING DEFAULTS) ON COMMIT DROP`)
	if err != nil {
		return fmt.Errorf("stage changed products: %w", err)
	}
	if _, err := q.CopyFrom(ctx, pgx.Identifier{"changed_products"}, writeColumns(), pgx.CopyFromRows(rows)); err != nil {
		return fmt.Errorf("stage changed products: %w", err)
	}
	_, err = q.Exec(ctx, `UPDATE catalog_products c SET (`+strings.Join(productWriteColumns, ", ")+`, updated_at) =
		(s.`+strings.Join(productWriteColumns, ", s.")+`, now())
		FROM changed_products s WHERE c.catalog_id = s.catalog_id AND c.product_code = s.product_code`)
	if err != nil {
		return fmt.Errorf("update products: %w", err)
	}
	if _, err := q.Exec(ctx, `DROP TABLE changed_products`); err != nil {
		return fmt.Errorf("drop staged products: %w", err)
	}
	return nil
}

func storedProducts(ctx context.Context, q Querier, catalogID uuid.UUID) (map[string]storedProduct, error) {
	rows, err := q.Query(ctx, `SELECT product_code, digest, position FROM catalog_products WHERE catalog_id = $1`,
		pgUUID(catalogID))
	if err != nil {
		return nil, fmt.Errorf("read product digests: %w", err)
	}
	defer rows.Close()
	out := map[string]storedProduct{}
	var code string
	var s storedProduct
	_, err = pgx.ForEachRow(rows, []any{&code, &s.digest, &s.position}, func() error {
		out[code] = storedProduct{digest: bytes.Clone(s.digest), position: s.position}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read product digests: %w", err)
	}
	return out, nil
}

// productsByCode reads the whole rows of the named products of a catalog.
func productsByCode(
	ctx context.Context, q Querier, catalogID uuid.UUID, codes []string,
) (map[string]CatalogProduct, error) {
	out := make(map[string]CatalogProduct, len(codes))
	if len(codes) == 0 {
		return out, nil
	}
	rows, err := q.Query(ctx, `SELECT `+productColumns+` FROM catalog_products
		WHERE catalog_id = $1 AND product_code = ANY($2::text[])`, pgUUID(catalogID), codes)
	if err != nil {
		return nil, fmt.Errorf("read changed products: %w", err)
	}
	products, err := pgx.CollectRows(rows, pgx.RowToStructByName[CatalogProduct])
	if err != nil {
		return nil, fmt.Errorf("read changed products: %w", err)
	}
	for _, p := range products {
		out[p.ProductCode] = p
	}
	return out, nil
}

// digester encodes products into a buffer it reuses: the SHA-256 of a product row's content,
// every column provisioning writes but its key and position (list order is compared apart, so
// that a reorder is not a content change). It is computed from the row provisioning means to
// write, and stored with it. Each value is written length- or presence-prefixed, so that no two
// contents share an encoding.
type digester struct{ buf []byte }

func (d *digester) sum(p *CatalogProduct) []byte {
	d.buf = d.buf[:0]
	for _, s := range []string{p.EAN, p.Name, p.ShortName, p.Image, p.Brand, p.Publisher, p.CountryCode,
		p.CurrencyCode, p.BuyingCurrencyCode, p.DenominationType, p.DiscountPercentage, p.MainCategory,
		p.SubCategory, p.ProductCategory, p.ProductType, p.Platform, p.Type, p.Status, p.ExpiryPolicy} {
		d.str(s)
	}
	for _, n := range []*int64{p.Price, p.BuyingPrice, p.RRP, p.DenominationMin, p.DenominationMax,
		p.DenominationStep, p.DenominationDefault} {
		d.flag(n != nil)
		if n != nil {
			d.buf = binary.AppendVarint(d.buf, *n)
		}
	}
	d.buf = binary.AppendUvarint(d.buf, uint64(len(p.Tags)))
	for _, t := range p.Tags {
		d.str(t)
	}
	d.buf = binary.AppendUvarint(d.buf, uint64(len(p.Languages)))
	for _, l := range p.Languages {
		for _, s := range []string{l.LanguageCode, l.Name, l.Image, l.Description, l.Tnc, l.RedemptionInstructions} {
			d.str(s)
		}
	}
	d.flag(p.Promotion != nil)
	if p.Promotion != nil {
		promo := p.Promotion.Data()
		for _, s := range []string{promo.Type, promo.Details, promo.StartDate, promo.EndDate} {
			d.str(s)
		}
	}
	d.flag(p.ServiceFee != nil)
	if p.ServiceFee != nil {
		fee := p.ServiceFee.Data()
		d.str(fee.Type)
		d.str(fee.Value)
	}
	for _, date := range []pgtype.Date{p.FirstSale, p.PlayableOn} {
		d.flag(date.Valid)
		d.buf = binary.AppendVarint(d.buf, date.Time.Unix())
		d.buf = binary.AppendVarint(d.buf, int64(date.InfinityModifier))
	}
	d.flag(p.Preorder)
	d.flag(p.Expires)
	sum := sha256.Sum256(d.buf)
	return sum[:]
}

func (d *digester) str(s string) {
	d.buf = binary.AppendUvarint(d.buf, uint64(len(s)))
	d.buf = append(d.buf, s...)
}

func (d *digester) flag(b bool) {
	if b {
		d.buf = append(d.buf, 1)
	} else {
		d.buf = append(d.buf, 0)
	}
}

// productValues are the values of productWriteColumns for a row, in the types pgx writes to
// those columns with COPY and with statement parameters alike.
func productValues(p *CatalogProduct, digest []byte) ([]any, error) {
	var pct pgtype.Numeric
	if err := pct.Scan(p.DiscountPercentage); err != nil {
		return nil, fmt.Errorf("product %s: discount percentage %q: %w", p.ProductCode, p.DiscountPercentage, err)
	}
	tags := []string(p.Tags)
	if tags == nil {
		tags = []string{}
	}
	langs := []ProductLanguage(p.Languages)
	if langs == nil {
		langs = []ProductLanguage{}
	}
	languages, err := json.Marshal(langs)
	if err != nil {
		return nil, fmt.Errorf("product %s: languages: %w", p.ProductCode, err)
	}
	var promotion, serviceFee any
	if p.Promotion != nil {
		b, err := json.Marshal(p.Promotion.Data())
		if err != nil {
			return nil, fmt.Errorf("product %s: promotion: %w", p.ProductCode, err)
		}
		promotion = string(b)
	}
	if p.ServiceFee != nil {
		b, err := json.Marshal(p.ServiceFee.Data())
		if err != nil {
			return nil, fmt.Errorf("product %s: service fee: %w", p.ProductCode, err)
		}
		serviceFee = string(b)
	}
	return []any{p.Position, p.EAN, p.Name, p.ShortName, p.Image, p.Brand, p.Publisher,
		p.CountryCode, p.CurrencyCode, p.BuyingCurrencyCode, p.DenominationType, p.Price, p.BuyingPrice, p.RRP,
		p.DenominationMin, p.DenominationMax, p.DenominationStep, p.DenominationDefault, pct,
		p.MainCategory, p.SubCategory, p.ProductCategory, p.ProductType, p.Platform, p.Type, tags, string(languages),
		promotion, serviceFee, p.Status, p.Preorder, p.FirstSale, p.PlayableOn, p.Expires, p.ExpiryPolicy,
		digest}, nil
}

// positionGap is the distance between the positions of neighbouring products when a catalog's
// positions are laid out afresh: products inserted later between two neighbours take positions
// in the gap, so an insertion writes only its own rows until a gap is used up.
const positionGap = 1024

// planPositions returns the position (the list-order key) of each product of codes, in order,
// given the positions of the products already stored. The longest run of stored products whose
// positions already follow the new order keeps its positions; the others (new products, and
// those that moved) take positions spread evenly in the gaps between their kept neighbours. When
// a gap is too narrow, or when nothing can be kept, every product is laid out afresh, positionGap
// apart.
func planPositions(codes []string, stored map[string]storedProduct) []int {
	out := make([]int, len(codes))
	keep := longestOrderedRun(codes, stored)
	if fit(codes, stored, keep, out) {
		return out
	}
	gap := int64(positionGap)
	if limit := int64(math.MaxInt32) / int64(len(codes)+1); limit < gap {
		gap = max(limit, 1)
	}
	for i := range out {
		out[i] = int(int64(i) * gap)
	}
	return out
}

// longestOrderedRun marks the stored products of codes that form a longest subsequence with
// strictly increasing stored positions (patience sorting, O(n log n)).
func longestOrderedRun(codes []string, stored map[string]storedProduct) []bool {
	keep := make([]bool, len(codes))
	pos := make([]int, len(codes))
	var tails []int // tails[k]: index into codes of the smallest last element of a run of length k+1
	prev := make([]int, len(codes))
	for i, code := range codes {
		s, ok := stored[code]
		if !ok {
			continue
		}
		pos[i] = s.position
		k := sort.Search(len(tails), func(k int) bool { return pos[tails[k]] >= s.position })
		prev[i] = -1
		if k > 0 {
			prev[i] = tails[k-1]
		}
		if k == len(tails) {
			tails = append(tails, i)
		} else {
			tails[k] = i
		}
	}
	if len(tails) == 0 {
		return keep
	}
	for i := tails[len(tails)-1]; i >= 0; i = prev[i] {
		keep[i] = true
	}
	return keep
}

// fit gives every product not kept a position between its kept neighbours, into out; false when
// nothing is kept or some gap is too narrow.
func fit(codes []string, stored map[string]storedProduct, keep []bool, out []int) bool {
	kept := 0
	for i := range codes {
		if keep[i] {
			out[i] = stored[codes[i]].position
			kept++
		}
	}
	if kept == 0 {
		return len(codes) == 0
	}
	for i := 0; i < len(codes); {
		if keep[i] {
			i++
			continue
		}
		j := i // the run of products to place is codes[i:j]
		for j < len(codes) && !keep[j] {
			j++
		}
		n := int64(j - i)
		var lo, hi int64
		switch {
		case i == 0:
			hi = int64(out[j])
			lo = hi - (n+1)*positionGap
		case j == len(codes):
			lo = int64(out[i-1])
			hi = lo + (n+1)*positionGap
		default:
			lo, hi = int64(out[i-1]), int64(out[j])
		}
		step := (hi - lo) / (n + 1)
		if step < 1 || lo < math.MinInt32 || hi > math.MaxInt32 {
			return false
		}
		for k := range n {
			out[i+int(k)] = int(lo + (k+1)*step)
		}
		i = j
	}
	return true
}
