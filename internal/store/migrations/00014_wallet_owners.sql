-- +goose Up
-- The Wallet resource that manages an account's wallet (threshold, top-ups). One account has one:
-- the first Wallet to claim it keeps it until it is deleted, and a second Wallet for the same
-- partner and environment is refused instead of merged into it. The claim is here, not decided
-- from the operator's cache, so that two operators (or a leader and its successor) can never
-- both apply two Wallets to one account.
CREATE TABLE wallet_owners (
    account_id  uuid PRIMARY KEY REFERENCES accounts (id),
    wallet_uid  text NOT NULL,
    name        text NOT NULL,
    claimed_at  timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
-- codeport:destroys SELECT count(*) FROM wallet_owners
DROP TABLE wallet_owners;
