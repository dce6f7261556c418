package configdb

import (
	"fmt"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/codeport/codeport/internal/store"
)

// Open is GORM over db's pool, through the database/sql view of it (store.DB.SQL): the
// process keeps one pool whoever uses it.
func Open(db *store.DB) (*gorm.DB, error) {
	gormDB, err := gorm.Open(postgres.New(postgres.Config{Conn: db.SQL}), &gorm.Config{
		Logger:                 logger.Discard,
		SkipDefaultTransaction: true,
		TranslateError:         true,
	})
	if err != nil {
		return nil, fmt.Errorf("open gorm: %w", err)
	}
	return gormDB, nil
}
