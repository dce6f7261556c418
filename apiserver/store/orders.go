package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Job is a row of River's job table: available now, default priority, no unique options, the
// row River's own insert writes for such a job. River works rows written by any client, as its
// other-language clients do.
type Job struct {
	Kind        string
	Queue       string
	Args        []byte
	MaxAttempts int
}

// InsertOrder records a new order with its lines (o.Lines) and the job that fulfils it, in one
// statement of tx, unless the account already has an order with the same external order code;
// inserted is false then and nothing is written. A concurrent insert of the same code waits for
// the other transaction, so exactly one of them inserts.
func InsertOrder(ctx context.Context, tx *gorm.DB, o *Order, fulfilment Job) (inserted bool, err error) {
	// Straight to the driver: GORM would expand the arrays into value lists.
	return insertedOrder(tx.Statement.ConnPool.QueryRowContext(ctx, placeOrderSQL, placementArgs(o, fulfilment, nil)...))
}

// LockDailySpend serialises the orders of one account and currency for the rest of tx, so two
// concurrent orders cannot both fit under a daily limit that only one of them fits.
func LockDailySpend(tx *gorm.DB, accountID uuid.UUID, currency string) error {
	err := tx.Exec(`SELECT pg_advisory_xact_lock(hashtextextended(?, 0))`, "spend:"+accountID.String()+":"+currency).Error
	if err != nil {
		return fmt.Errorf("lock daily spend: %w", err)
	}
	return nil
}

// SpentSince sums the value of an account's orders in currency placed since start, less what
// was refunded for undelivered units.
func SpentSince(tx *gorm.DB, accountID uuid.UUID, currency string, start time.Time) (int64, error) {
	var spent int64
	err := tx.Raw(`SELECT COALESCE(sum(total_price - refunded_amount), 0)::bigint FROM orders
		WHERE account_id = ? AND currency = ? AND created_at >= ?`, accountID, currency, start).Row().Scan(&spent)
	if err != nil {
		return 0, fmt.Errorf("sum daily spend: %w", err)
	}
	return spent, nil
}

// FindOrder returns an account's order with its lines, by order id or external order code.
// Another account's order is not found, whatever the reference.
func FindOrder(ctx context.Context, db *gorm.DB, accountID uuid.UUID, reference string) (Order, error) {
	if id, err := uuid.Parse(reference); err == nil {
		o, err := findOrder(ctx, db, "account_id = ? AND id = ?", accountID, id)
		if !errors.Is(err, ErrNotFound) {
			return o, err
		}
	}
	return FindOrderByExternalCode(ctx, db, accountID, reference)
}

// FindOrderByExternalCode returns an account's order with its lines by external order code.
func FindOrderByExternalCode(ctx context.Context, db *gorm.DB, accountID uuid.UUID, code string) (Order, error) {
	return findOrder(ctx, db, "account_id = ? AND external_order_code = ?", accountID, code)
}

func findOrder(ctx context.Context, db *gorm.DB, where string, args ...any) (Order, error) {
	var o Order
	err := db.WithContext(ctx).Preload("Lines", func(db *gorm.DB) *gorm.DB { return db.Order("line_no") }).
		Where(where, args...).Take(&o).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Order{}, ErrNotFound
	}
	if err != nil {
		return Order{}, fmt.Errorf("find order: %w", err)
	}
	return o, nil
}

// DeliveredCodesOf returns an order's delivered codes (still encrypted) in line and unit order.
func DeliveredCodesOf(ctx context.Context, db *gorm.DB, orderID uuid.UUID) ([]DeliveredCode, error) {
	var out []DeliveredCode
	err := db.WithContext(ctx).Where("order_id = ?", orderID).Order("line_no, unit_no").Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("load delivered codes: %w", err)
	}
	return out, nil
}

// LockProcessingOrder locks an order that is still processing, with its lines, for the
// fulfilment transaction. A finished order is ErrNotFound: finishing happens once.
func LockProcessingOrder(tx *gorm.DB, orderID uuid.UUID) (Order, error) {
	var o Order
	err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).
		Where("id = ? AND status = ?", orderID, OrderProcessing).Take(&o).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Order{}, ErrNotFound
	}
	if err != nil {
		return Order{}, fmt.Errorf("lock order %s: %w", orderID, err)
	}
	if err := tx.Where("order_id = ?", orderID).Order("line_no").Find(&o.Lines).Error; err != nil {
		return Order{}, fmt.Errorf("load lines of order %s: %w", orderID, err)
	}
	return o, nil
}

// takeStockSQL claims codes oldest import first, through the index of available codes: its
// ORDER BY is one the primary key cannot give, so no statistics can make the planner walk the
// key past every code already delivered.
const takeStockSQL = `UPDATE code_stock SET order_id = ?, delivered_at = now()
	WHERE id IN (SELECT id FROM code_stock WHERE product_code = ? AND order_id IS NULL
	             ORDER BY imported_at, id LIMIT ? FOR UPDATE SKIP LOCKED)
	RETURNING id, product_code, ciphertext, digest`

// TakeStock assigns up to n unassigned codes of a product to an order, oldest import first, and
// returns them. Rows locked by concurrent fulfilments are skipped, so orders never wait on each
// other or share a code.
func TakeStock(tx *gorm.DB, orderID uuid.UUID, productCode string, n int) ([]CodeStock, error) {
	var out []CodeStock
	if err := tx.Raw(takeStockSQL, orderID, productCode, n).Scan(&out).Error; err != nil {
		return nil, fmt.Errorf("take stock of %s: %w", productCode, err)
	}
	return out, nil
}

// InsertDeliveredCodes records delivered units.
func InsertDeliveredCodes(tx *gorm.DB, codes []DeliveredCode) error {
	if len(codes) == 0 {
		return nil
	}
	if err := tx.CreateInBatches(&codes, 500).Error; err != nil {
		return fmt.Errorf("record delivered codes: %w", err)
	}
	return nil
}

// FinishOrder moves a processing order to its terminal state.
func FinishOrder(tx *gorm.DB, orderID uuid.UUID, status string, delivered int, refunded int64, reason *string) error {
	res := tx.Model(&Order{}).Where("id = ? AND status = ?", orderID, OrderProcessing).Updates(map[string]any{
		"status": status, "delivered": delivered, "refunded_amount": refunded, "reason": reason, "finished_at": time.Now(),
	})
	if res.Error != nil {
		return fmt.Errorf("finish order %s: %w", orderID, res.Error)
	}
	if res.RowsAffected != 1 {
		return fmt.Errorf("finish order %s: %w", orderID, ErrNotFound)
	}
	return nil
}

// StockCount returns the number of undelivered codes of a product.
func StockCount(ctx context.Context, db *gorm.DB, productCode string) (int64, error) {
	var n int64
	err := db.WithContext(ctx).Model(&CodeStock{}).Where("product_code = ? AND order_id IS NULL", productCode).
		Count(&n).Error
	if err != nil {
		return 0, fmt.Errorf("count stock: %w", err)
	}
	return n, nil
}

// InsertStock adds encrypted codes to the stock in one statement; codes whose digest is already
// known (in stock or delivered) are skipped and counted in duplicates.
func InsertStock(tx *gorm.DB, rows []CodeStock) (inserted int64, err error) {
	if len(rows) == 0 {
		return 0, nil
	}
	res := tx.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "digest"}}, DoNothing: true}).Create(&rows)
	if res.Error != nil {
		return 0, fmt.Errorf("insert stock: %w", res.Error)
	}
	return res.RowsAffected, nil
}
