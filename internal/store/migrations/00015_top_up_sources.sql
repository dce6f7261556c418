-- +goose Up
-- Which WalletTopUp resource recorded a top-up entry of the ledger. Entries of a Wallet's
-- spec.topUps have no row here. A WalletTopUp recognises its own entry by this row, a second
-- record of the same id (another WalletTopUp, or the Wallet's list) is refused instead of being
-- taken for applied, and a Wallet does not report WalletTopUps' entries as removed from its list.
-- wallet_entries is append-only, so the row is written with its entry, in one transaction.
CREATE TABLE top_up_sources (
    account_id  uuid NOT NULL,
    kind        text NOT NULL DEFAULT 'top_up' CHECK (kind = 'top_up'),
    reference   text NOT NULL,
    source      text NOT NULL CHECK (source <> ''),
    PRIMARY KEY (account_id, reference),
    CONSTRAINT top_up_sources_entry_fk FOREIGN KEY (account_id, kind, reference)
        REFERENCES wallet_entries (account_id, kind, reference)
);

-- +goose Down
-- codeport:destroys SELECT count(*) FROM top_up_sources
DROP TABLE top_up_sources;
